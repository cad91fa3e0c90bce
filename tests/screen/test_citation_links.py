"""Citation links in screening, on real records: identifiers meet in one normal form, OpenAlex exports and stored
PubMed references become links, and a record sharing references with a known exclude moves down."""

from __future__ import annotations

import importlib.util
import socket
from dataclasses import replace
from pathlib import Path

import numpy as np
from screen_support import screen_cfg

from ra_agent.screen.features import build_features, citation_matrix, linked, split_ids, work_id
from ra_agent.screen.model import fit, prepare
from ra_agent.screen.project import fill_citation_links, project_from_import, records
from ra_agent.screen.simulate import read_labelled_csv
from ra_agent.workspace import open_store

ROOT = Path(__file__).resolve().parents[2]
SYNERGY = ROOT / "tests" / "fixtures" / "synergy" / "Nelson_2002"
PUBMED = ROOT / "tests" / "fixtures" / "eutils" / "pubmed7.xml"


def _openalex_csv(tmp_path: Path) -> Path:
    spec = importlib.util.spec_from_file_location("synergy_csv", ROOT / "bench" / "synergy_csv.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.convert(SYNERGY, tmp_path)


def test_identifier_forms_meet():
    assert work_id("https://doi.org/10.1016/S0149-2918(97)80125-7") == work_id("10.1016/s0149-2918(97)80125-7")
    assert work_id("https://pubmed.ncbi.nlm.nih.gov/9220205/") == work_id("9220205") == "pmid:9220205"
    assert work_id("https://openalex.org/W2037688346") == work_id("W2037688346") == "openalex:W2037688346"
    assert work_id("") == work_id("0") == ""
    assert split_ids("https://openalex.org/W1 W2; 10.1/a,12345") == ("openalex:W1", "openalex:W2", "doi:10.1/a",
                                                                      "pmid:12345")  # fmt: skip


def test_an_openalex_export_links_records_that_share_references(tmp_path):
    data = read_labelled_csv(_openalex_csv(tmp_path), "label_included")
    assert all(r.refs for r in data.records)
    assert all(any(i.startswith("openalex:") for i in r.ids) for r in data.records)
    links = citation_matrix(data.records)
    assert links is not None
    shared = (links @ links.T).toarray()
    for a, ra in enumerate(data.records):
        for b, rb in enumerate(data.records):
            if a != b:  # a link exactly where two records cite a common work (or one cites the other)
                common = set(ra.refs + ra.ids) & set(rb.refs + rb.ids)
                assert (shared[a, b] > 0) == bool(common), (a, b, common)
    assert (shared[~np.eye(len(shared), dtype=bool)] > 0).any()
    everyone = list(range(len(data.records)))
    for row in everyone:  # what `ra screen` names as a shown record's links to the includes decided so far
        assert linked(links, row, everyone) == [b for b in everyone if b != row and shared[row, b] > 0]


def test_a_record_sharing_references_with_a_known_exclude_moves_down(tmp_path):
    data = read_labelled_csv(_openalex_csv(tmp_path), "label_included")
    screen = replace(screen_cfg(tmp_path).screen, dense_weight=0.0, combine="zsum")  # the SVM's own margins
    features = build_features(data.records, np.zeros((len(data.records), 8), np.float32), screen)
    links = (features.links @ features.links.T).toarray()
    assert features.linked_records == int(((links - np.diag(np.diag(links))) > 0).any(axis=1).sum()) > 0
    include = int(np.flatnonzero(data.labels == 1)[0])
    exclude, linked = (int(i) for i in np.argwhere(np.triu(links, 1) > 0)[0])
    assert data.labels[exclude] == 0 and linked != include
    others = [i for i in range(len(data.records)) if links[linked, i] == 0 and i not in (include, exclude)]

    def margin(weight: float) -> float:
        scores = fit(prepare(features, replace(screen, links_weight=weight)), [include, exclude], [1, 0], screen,
                     seed=0).scores  # fmt: skip
        return float(scores[linked] - scores[others].mean())

    assert margin(0.7) < margin(0.0)


def test_a_project_from_pubmed_xml_screens_with_the_stored_references(tmp_path):
    cfg = screen_cfg(tmp_path / "data")
    with open_store(cfg) as store:
        project = project_from_import(cfg, store, PUBMED)
        (record,) = records(store, project)
        stored = store.references_of(record.pmid)
    assert record.ids[0] == f"pmid:{record.pmid}"
    assert len(stored) > 10
    assert set(record.refs) == {work_id(str(r.pmid)) if r.pmid else work_id(r.doi or "") for r in stored}


def test_a_plain_export_gets_its_citation_links_from_pubmed_once_online(tmp_path, eutils_server, crossref_server,
                                                                        cfg_for):  # fmt: skip
    """`ra screen --from` on an export without references: elink (the replay of real PubMed answers) fills them."""
    from replay import load_index

    index = load_index()
    cited = {p: r.refs for p, r in index.records.items() if r.refs}
    export = tmp_path / "plain.csv"
    export.write_text("pmid,title\n" + "".join(f'{p},"{index.records[p].title}"\n' for p in cited))
    offline = screen_cfg(tmp_path / "offline")
    with open_store(offline) as store:
        project = project_from_import(offline, store, export)
        linked_offline, total, fetched = fill_citation_links(offline, store, project)
        assert (linked_offline, total, fetched.offline) == (0, len(cited), True)
        assert not any(r.refs for r in records(store, project))
    cfg = cfg_for(tmp_path / "online", eutils_server, crossref_server)
    with open_store(cfg) as store:
        project = project_from_import(cfg, store, export)
        linked_online, total, fetched = fill_citation_links(cfg, store, project)
        recs = records(store, project)
    assert not fetched.offline and fetched.elink_edges > 0 and linked_online == total
    for record in recs:
        assert set(record.refs) == {f"pmid:{p}" for p in cited[record.pmid] if p != record.pmid}
    # online but PubMed unreachable (a closed loopback port): no links, and the failure is recorded, never raised
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    down = cfg_for(tmp_path / "down", crossref_server, eutils_base_url=closed)
    with open_store(down) as store:
        project = project_from_import(down, store, export)
        linked_down, _, fetched = fill_citation_links(down, store, project)
    assert linked_down == 0 and fetched.offline and "elink" in fetched.error
