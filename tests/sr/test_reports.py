"""Gap dossier and SR draft: every cited PMID exists, counts match the store, the PRISMA flow PNG, the draft passes PRISMA."""

from __future__ import annotations

import re

import pytest

from ra_agent.evidence.pico.extract import count_eligible, read_pico
from ra_agent.evidence.prisma import prisma_check
from ra_agent.evidence.reports import (
    ReportError,
    cited_pmids,
    cluster_evidence,
    gap_dossier,
    prisma_flow,
    sr_draft,
    verify_citations,
)
from ra_agent.evidence.sr_search import find_existing_sr
from ra_agent.llm.rules_brain import RulesBrain
from ra_agent.topics.expansion import semantic_boundary
from ra_agent.topics.view import pico_path

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def section(markdown: str, title: str) -> str:
    """The body of the Markdown section whose heading ends with `title`, up to the next heading of that level."""
    match = re.search(rf"^(#+) {re.escape(title)}.*?$", markdown, re.M)
    assert match, title
    level = len(match.group(1))
    rest = markdown[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def eligible_count(world, cluster_id):
    records = {r.pmid: r for r in read_pico(pico_path(world.cfg, cluster_id))}
    return count_eligible(world.store.papers(world.members(cluster_id)), records)


def test_cited_pmids_and_verify_citations(demo, tmp_path):
    text = "Trials [PMID:10024259] and [PMID: 11421865]; see PMID 99999999."
    assert cited_pmids(text) == {10024259, 11421865, 99999999}
    path = tmp_path / "r.md"
    path.write_text(text)
    assert verify_citations(demo.store, path) == [99999999]


def test_gap_dossier(demo, embedder):
    cid = demo.trials_cluster
    brain = RulesBrain()
    sr = find_existing_sr(demo.cfg, demo.store, cid, embedder=embedder)
    prisma = prisma_check(demo.cfg, demo.store, cid, brain, sr_pmids=sr.sr_pmids)
    path = gap_dossier(demo.cfg, demo.store, cid, goal_id="g-test", brain_name=brain.name, sr=sr, prisma=prisma)
    assert path == demo.cfg.data_dir / "reports" / f"gap_dossier_{cid}.md"
    text = path.read_text(encoding="utf-8")
    assert verify_citations(demo.store, path) == [] and cited_pmids(text)
    assert brain.name in text.split("\n\n")[1]  # the generated-by line names the brain
    expected = eligible_count(demo, cid)
    listed = re.findall(r"^\d+\. .*\[PMID:(\d+)\]$", section(text, "Eligible randomised trials"), re.M)
    assert len(listed) == expected == len(set(listed)) and f"({expected})" in text
    assert set(map(int, listed)) <= set(demo.members(cid))
    pico_rows = re.findall(r"^\| \[PMID:(\d+)\]", section(text, "PICO of the eligible trials"), re.M)
    assert pico_rows == listed
    reviews = section(text, "Existing systematic reviews")
    assert sr.query in reviews and f"{sr.overlap:.3f}" in reviews
    assert {int(p) for p in re.findall(r"\[PMID:(\d+)\]", reviews)} == set(sr.reviews)
    why = section(text, "Why this is a gap")
    assert f"{expected} eligible randomised trials" in why
    gap = expected >= demo.cfg.sr.min_eligible_trials and not sr.covered and not prisma.compliant
    assert ("Verdict: evidence gap" in why) == gap


def test_gap_dossier_needs_pico(demo):
    cid = demo.trials_cluster
    pico_path(demo.cfg, cid).unlink()
    with pytest.raises(ReportError, match="run_pico"):
        gap_dossier(demo.cfg, demo.store, cid, goal_id="g", brain_name="b", sr=None, prisma=None)


def test_sr_draft_after_expansion_passes_prisma(demo):
    cid = demo.trials_cluster
    brain = RulesBrain()
    grown = semantic_boundary(demo.cfg, demo.store, cid, demo.unassigned(), brain, vectors=demo.vectors,
                              available_bytes=lambda: 1 << 50)  # fmt: skip
    path = sr_draft(demo.cfg, demo.store, cid, goal_id="g-test", brain_name=brain.name, prisma=None)
    assert path.name == f"sr_draft_{cid}.md"
    text = path.read_text(encoding="utf-8")
    assert verify_citations(demo.store, path) == []
    png = path.with_name(f"sr_draft_{cid}_prisma_flow.png")
    assert png.read_bytes()[:8] == PNG_MAGIC and f"]({png.name})" in text
    # flow counts match the store
    ev = cluster_evidence(demo.cfg, demo.store, cid)
    flow = prisma_flow(demo.cfg, demo.store, ev)
    members = demo.members(cid)
    judged_out = (
        set(grown.to_dict()["no_vector"]) | {p for b in grown.batches for p in b.shown} | set(demo.unassigned())
    )
    assert flow.assessed == len(members) and flow.eligible == eligible_count(demo, cid) == flow.included
    assert flow.identified == len(members) + flow.from_expansion and flow.from_expansion <= len(judged_out)
    assert flow.no_pico + flow.not_randomised + flow.missing_pio + flow.eligible == flow.assessed
    assert flow.no_pico == len(grown.admitted)  # joined the cluster (tau_assign intake) after run_pico
    table = section(text, "Study selection")
    for row in flow.rows():
        assert f"| {row['stage']} | {row['n']} |" in table
    included = re.findall(r"^\| \[PMID:(\d+)\]", section(text, "Included trials"), re.M)
    assert len(included) == flow.included
    synthesis = section(text, "Synthesis of the abstracts")
    quoted = re.findall(r"^- \[PMID:(\d+)\] \(", synthesis, re.M)
    assert sorted(quoted) == sorted(included)  # every included trial is quoted once, in one group
    first = int(quoted[0])
    found = re.search(rf"^- \[PMID:{first}\] \(\w+\): (.+)$", synthesis, re.M)
    paper = demo.store.paper(first)
    assert found and paper and found.group(1).rstrip("…")[:60] in paper.abstract  # quoted, not invented
    # the draft reports PRISMA items 4-8, so a check of the draft passes
    check = prisma_check(demo.cfg, demo.store, cid, brain, draft_text=text)
    assert check.as_dict() == {"compliant": True, "missing_items": []} and check.source == "draft"
    again = sr_draft(demo.cfg, demo.store, cid, goal_id="g-test", brain_name=brain.name, prisma=check)
    assert "**compliant**" in section(again.read_text(encoding="utf-8"), "PRISMA check")
