"""bench/synergy_csv.py on a real SYNERGY dataset subset: OpenAlex inverted abstracts decoded, labels kept, bad input named."""

from __future__ import annotations

import csv
import importlib.util
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from ra_agent.screen.simulate import read_labelled_csv

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "synergy" / "Nelson_2002"


def _module():
    spec = importlib.util.spec_from_file_location("synergy_csv", ROOT / "bench" / "synergy_csv.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _works() -> dict[str, dict]:
    with zipfile.ZipFile(FIXTURE / "works_1.zip") as z:
        return {w["id"]: w for name in z.namelist() for w in json.loads(z.read(name))}


def test_converts_labels_and_decodes_abstracts_in_position_order(tmp_path, capsys):
    out = _module().convert(FIXTURE, tmp_path)
    labels = list(csv.DictReader((FIXTURE / "labels.csv").open()))
    works = _works()
    in_zip = [r for r in labels if r["openalex_id"] in works]
    assert len(in_zip) < len(labels)  # the fixture leaves one labelled work out of the zip
    assert "1 labelled works not in the zips" in capsys.readouterr().out

    data = read_labelled_csv(out, "label_included")
    assert [int(r["label_included"]) for r in in_zip] == data.labels.tolist()
    assert 0 < data.labels.sum() < len(data.labels)
    for row, record in zip(in_zip, data.records, strict=True):
        work = works[row["openalex_id"]]
        assert record.pmid == int(row["pmid"].rsplit("/", 1)[-1])
        assert record.title == work["title"]
        assert record.year == work["publication_year"]
        # the words at each position of the CSV's abstract are exactly OpenAlex's inverted index
        rebuilt: dict[str, list[int]] = {}
        for pos, word in enumerate(record.abstract.split(" ")):
            rebuilt.setdefault(word, []).append(pos)
        index = {w: sorted(p) for w, p in work["abstract_inverted_index"].items() if w.strip()}
        assert {w: p for w, p in rebuilt.items() if w.strip()} == index


def test_bad_folders_and_rows_are_named(tmp_path):
    module = _module()
    with pytest.raises(SystemExit, match=f"{tmp_path}: needs labels.csv and works_"):
        module.convert(tmp_path, tmp_path / "out")
    bad = tmp_path / "Nelson_2002"
    shutil.copytree(FIXTURE, bad)
    rows = (bad / "labels.csv").read_text().splitlines()
    rows[3] = rows[3].rsplit(",", 1)[0] + ",maybe"
    (bad / "labels.csv").write_text("\n".join(rows) + "\n")
    with pytest.raises(SystemExit, match=r"labels.csv:4: needs openalex_id and a 0/1 label_included"):
        module.convert(bad, tmp_path / "out")
    assert not (tmp_path / "out" / "Nelson_2002.csv").exists()
