"""The hand-made arm-level gold of the fields other than reflux (tests/fixtures/arm_data/fields_*.tsv, PROVENANCE.md)
holds what its provenance says: every number traced to a sentence of its stored abstract, the split made by its
rule, values that a review could pool."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import pytest

GOLD_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "arm_data"
COLUMNS = ("pmid", "field", "arm", "role", "outcome", "time", "population", "events", "total", "mean", "spread",
           "dispersion", "quote")  # fmt: skip


def _rows(name: str) -> list[dict[str, str]]:
    lines = [line for line in (GOLD_DIR / name).read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    return [dict(zip(COLUMNS, line.split("\t"), strict=True)) for line in lines]


def _records(name: str) -> dict[int, tuple[str, str]]:
    csv.field_size_limit(10**7)
    with (GOLD_DIR / name).open(encoding="utf-8", newline="") as fh:
        return {int(r["pmid"]): (r["field"], r["abstract"]) for r in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def abstracts() -> dict[int, tuple[str, str]]:
    return _records("fields_records.csv")


def _check_datum(r: dict[str, str], abstracts: dict[int, tuple[str, str]]) -> None:
    """A gold datum's quote is in its abstract, its role and population are known, and its numbers are one kind."""
    field, abstract = abstracts[int(r["pmid"])]
    assert r["field"] == field and " ".join(r["quote"].split()) in abstract, r
    assert r["role"] in ("I", "C") and r["population"] in ("ITT", "PP", "-"), r
    if r["events"] != "-":
        assert 0 <= int(r["events"]) <= int(r["total"]) and r["mean"] == r["spread"] == r["dispersion"] == "-", r
    else:
        assert int(r["total"]) > 1 and float(r["spread"]) >= 0 and r["dispersion"] in ("SD", "SE", "±"), r
        assert float(r["mean"]) == float(r["mean"]), r


def test_every_gold_number_is_quoted_from_its_abstract(abstracts):
    rows = _rows("fields_dev.tsv") + _rows("fields_heldout.tsv")
    data = [r for r in rows if r["arm"] != "-"]
    assert len({int(r["pmid"]) for r in rows}) == len(abstracts) == 90
    assert len(data) == 170 and len({int(r["pmid"]) for r in data}) == 35
    for r in data:
        _check_datum(r, abstracts)


def test_the_split_alternates_sorted_pmids_within_each_field(abstracts):
    dev = {int(r["pmid"]) for r in _rows("fields_dev.tsv")}
    held = {int(r["pmid"]) for r in _rows("fields_heldout.tsv")}
    assert not dev & held
    by_field: dict[str, list[int]] = defaultdict(list)
    for pmid, (field, _) in abstracts.items():
        by_field[field].append(pmid)
    assert len(by_field) == 3
    for pmids in by_field.values():
        ordered = sorted(pmids)
        assert set(ordered[0::2]) <= dev and set(ordered[1::2]) <= held


# Each fresh gold file (PROVENANCE.md), scored once: its records, fields and counts (abstracts, abstracts with data,
# gold data, dichotomous data), so that a silent edit after scoring shows.
FRESH = {
    "fields_fresh.tsv": ("fields_fresh_records.csv", {"atypical antipsychotics", "NSAIDs"}, 52, 22, 93, 77),
    "fields_fresh3.tsv": ("fields_fresh3_records.csv", {"calcium channel blockers", "urinary incontinence drugs"},
                          66, 28, 132, 93),
}  # fmt: skip


@pytest.mark.parametrize("gold", sorted(FRESH))
def test_the_fresh_fields_gold_is_quoted_from_its_abstracts(gold, abstracts):
    """fields_fresh.tsv and fields_fresh3.tsv (further fields, PROVENANCE.md): the same checks as the three fields'
    files, their own counts, and no abstract shared with any other gold file's records."""
    records_name, fields, n_abstracts, n_with_data, n_data, n_dichotomous = FRESH[gold]
    fresh_abstracts = _records(records_name)
    rows = _rows(gold)
    data = [r for r in rows if r["arm"] != "-"]
    assert {int(r["pmid"]) for r in rows} == set(fresh_abstracts) and len(fresh_abstracts) == n_abstracts
    assert not set(fresh_abstracts) & set(abstracts)
    for other in FRESH:
        if other != gold:
            assert not set(fresh_abstracts) & set(_records(FRESH[other][0])), other
    assert {f for f, _ in fresh_abstracts.values()} == fields
    assert len(data) == n_data and len({int(r["pmid"]) for r in data}) == n_with_data
    assert sum(r["events"] != "-" for r in data) == n_dichotomous
    for r in rows:
        if r["arm"] == "-":
            assert all(r[c] == "-" for c in COLUMNS[2:]), r
            assert sum(int(s["pmid"]) == int(r["pmid"]) for s in rows) == 1, r
    for r in data:
        _check_datum(r, fresh_abstracts)
