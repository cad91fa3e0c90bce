"""Issue 11 acceptance on the demo corpus (offline, rules brain): the seek_gap dossier and the conduct_SR draft."""

from __future__ import annotations

import re
from pathlib import Path

from PIL import Image

from ra_agent.agent.runner import run_goal, start_goal
from ra_agent.evidence.prisma.checklist import PRISMA_2020
from ra_agent.evidence.reports.common import verify_citations
from ra_agent.llm.rules_brain import RulesBrain
from ra_agent.workspace import open_store

REVIEW_TYPES = {"Review", "Systematic Review", "Meta-Analysis"}
REVIEW_TITLE = re.compile(r"\breview\b|\bmeta-?analy", re.I)

NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty"
).split()


def run(cfg, project: Path, handbook: str):
    brain = RulesBrain()
    with open_store(cfg) as store:
        goal = start_goal(cfg, store, project / handbook, brain.name)
        return run_goal(cfg, store, goal.goal_id, brain)


def reports_of(cfg, state, kind: str) -> list[Path]:
    """The reports a goal wrote, from its report_written history events (absolute, or relative to the workspace)."""
    paths = [Path(h["path"]) for h in state.events("report_written") if h["kind"] == kind]
    return [p if p.is_absolute() else cfg.data_dir / p for p in paths]


def section(markdown: str, title: str) -> str:
    match = re.search(rf"^(#+) {re.escape(title)}.*?$", markdown, re.M)
    assert match, title
    rest = markdown[match.end() :]
    end = re.search(rf"^#{{1,{len(match.group(1))}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def test_seek_gap_dossier_lists_the_reviews_checked_says_what_was_not_checked_and_counts_no_review(demo, demo_project):
    """The demo goal's dossier (the covered question it pivoted from): its summary and its rows agree (the reviews
    checked against those listed, the studies against the rows), it says the search was the local corpus only, and
    no review is counted as a study."""
    state = run(demo, demo_project, "handbooks/seek_gap_ppi_gerd.md")
    assert state.status == "stopped"
    (written,) = [h for h in state.events("report_written") if h["kind"] == "gap_dossier"]
    dossier = reports_of(demo, state, "gap_dossier")[0]
    text = dossier.read_text(encoding="utf-8")
    assert any(h["question_id"] == written["question_id"] for h in state.events("alternative_proposed"))
    assert "**Verdict: covered, update warranted.**" in text and text.splitlines()[4].startswith("Covered by ")
    assert "- trials and reviews outside the local corpus (PubMed was not searched again)" in text
    reviews = section(text, "Reviews checked")
    checked = re.search(r"Reviews checked: (\d+) reviews of the local corpus .*?: (\d+) answer the question, (\d+) name "
                        r"its population but ask another question, (\d+) are about other topics", reviews)  # fmt: skip
    assert checked, reviews[:400]
    total, answering, other, rest = map(int, checked.groups())
    assert answering + other + rest == total >= 1
    listed = re.findall(r"^- \[PMID:(\d+)\] \(\d+\) ", section(text, "Reviews whose own question encompasses it"), re.M)
    assert len(listed) == answering and f"({answering})" in reviews
    assert f"encompasses it ({answering})" in reviews and f"do not answer it ({other}" in reviews
    studies = section(text, "Studies")
    rows = re.findall(r"^\| s-\d+ \| ((?:\[PMID:\d+\](?:, )?)+) \|", studies, re.M)
    heading = re.search(r"^## Studies \((\d+) studies \((\d+) reports\)\)", text, re.M)
    assert heading and len(rows) == int(heading.group(1)) >= demo.sr.min_eligible_trials
    reports = [int(p) for row in rows for p in re.findall(r"\[PMID:(\d+)\]", row)]
    assert len(reports) == int(heading.group(2)) == len(set(reports))
    with open_store(demo) as store:
        assert verify_citations(store, dossier) == []
        papers = store.papers(reports)
    assert len(papers) == len(reports)
    for paper in papers:  # no review, systematic review or meta-analysis counts as a trial
        assert not REVIEW_TYPES & set(paper.pub_types), paper.pmid
        assert not REVIEW_TITLE.search(paper.title), (paper.pmid, paper.title)
    assert not set(reports) & {int(p) for p in listed}


def test_conduct_sr_stops_with_its_draft_prisma_checklist_and_flow_diagram(demo, demo_project):
    state = run(demo, demo_project, "handbooks/conduct_sr_ppi.md")
    assert state.status == "stopped" and state.cycle <= demo.goal.max_cycles
    tools = [h["tool"] for h in state.events("tool_call")]
    assert "prisma_check" in tools and tools.count("prisma_check") == 1
    drafts = reports_of(demo, state, "sr_draft")
    assert drafts
    draft = drafts[-1]
    text = draft.read_text(encoding="utf-8")
    with open_store(demo) as store:
        assert verify_citations(store, draft) == []
    # the draft: PICO table, methods with the search string and its date, PRISMA check and checklist
    assert re.search(r"^\| \[PMID:\d+\] \|", section(text, "Included studies"), re.M)
    search = section(text, "Search strategy")
    assert "proton pump inhibitors AND gastroesophageal reflux" in search
    assert re.search(r"on \d{4}-\d\d-\d\d", search)
    # the Objectives compare what the title compares; the sources are the imports the question's records came from
    title = text.splitlines()[0]
    objectives = section(text, "Objectives")
    assert "effects of proton pump inhibitors compared with any comparator in people with gastroesophageal reflux" \
        in objectives  # fmt: skip
    main = title.split("(main comparison: ", 1)[1].rstrip(")")
    assert f"Its main comparison: {main}." in objectives
    sources = re.findall(r"^- (.+)$", section(text, "Information sources"), re.M)
    assert sources[0].startswith("search export Cohen_2006_ProtonPumpInhibitors.csv") and "of its reports" in sources[0]
    assert not [s for s in sources if s.startswith("search export") and "Cohen_2006" not in s]
    assert "**compliant**" in section(text, "PRISMA check")
    checklist = draft.with_name(f"{draft.stem}_prisma_checklist.md")
    listed = checklist.read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| [^|]+ \| [^|]+ \| (met|missing) \|", listed, re.M)
    assert [int(i) for i, _ in rows] == sorted(PRISMA_2020)
    status = {int(i): s for i, s in rows}
    assert all(status[i] == "met" for i in (4, 5, 6, 7, 8))  # the items prisma_check tests
    # the synthesis sub-items: the draft pools the main comparison and re-estimates it (sensitivity analysis)
    sub = dict(re.findall(r"^\| (13[a-f]|20[a-d]) \| [^|]+ \| [^|]+ \| (met|missing) \|", listed, re.M))
    assert sorted(sub) == [*(f"13{c}" for c in "abcdef"), *(f"20{c}" for c in "abcd")] and set(sub.values()) == {"met"}
    assert status[11] == "missing" and status[15] == "missing"  # risk of bias and certainty were not assessed
    assert section(text, "PRISMA 2020 checklist").count("| missing |") == list(status.values()).count("missing")
    # the flow diagram is a real PNG image
    flow = draft.with_name(f"{draft.stem}_prisma_flow.png")
    with Image.open(flow) as image:
        assert image.format == "PNG" and image.size[0] > 400 and image.size[1] > 400
        assert len(image.getcolors(1 << 16) or range(3)) > 2  # not a blank canvas
    assert f"]({flow.name})" in text
    # Success (eligible_trials >= 6 AND PRISMA_compliant == true) holds on ra's own checked draft
    assert state.success_questions and any(h.get("reason") == "success" for h in state.events("stopped"))
    with open_store(demo) as store:
        assert_synthesis_traceable(text, draft, store)
    assert_reports_asset_shows_the_synthesis(demo_project, state.goal_id, draft)


def assert_reports_asset_shows_the_synthesis(project: Path, goal_id: str, draft: Path) -> None:
    """The Dagster `reports` asset, materialised for the goal, lists the draft's comparisons, pooled estimates and
    forest plots (paths and Markdown images) as metadata, as the draft's synthesis record holds them."""
    import json

    import dagster as dg

    from ra_agent.evidence import synthesis_code_version
    from ra_assets.defs.findings.assets import reports
    from ra_assets.resources import build_resources

    from .conftest import write_config

    config = write_config(project)
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([reports], resources=build_resources(str(config)), instance=instance,
                                tags={"ra/goal": goal_id})  # fmt: skip
    assert result.success and reports.code_versions_by_key[dg.AssetKey("reports")] == synthesis_code_version()
    meta = {k: v.value for k, v in result.asset_materializations_for_node("reports")[0].metadata.items()}
    record = json.loads(draft.with_name(f"{draft.stem}_synthesis.json").read_text(encoding="utf-8"))
    assert meta["main_comparison"] == [f"{draft.name}: {record['main']}"]
    assert record["main"].startswith("For proton pump inhibitor vs H2-receptor antagonist in erosive oesophagitis, ")
    assert [c["comparison"] for c in meta["comparisons"]] == [c["comparison"] for c in record["comparisons"]]
    pooled = [c for c in meta["comparisons"] if c["effect"] is not None]
    assert pooled and all(c["in_question"] and c["ci_low"] < c["effect"] < c["ci_high"] for c in pooled)
    for c in pooled:
        assert (
            f"| {c['comparison']} | {c['outcome_label']} | {len(c['trials'])} | {c['participants']} | RR "
            in (meta["pooled_estimates"])
        )
    plots = [project / "data" / p for p in meta["forest_plots"]]
    assert len(plots) == len(pooled) and all(p.read_bytes()[:4] == b"\x89PNG" for p in plots)
    assert meta["forest_plot_images"].count("![") == len(plots)
    assert all(f"]({p.as_posix()})" in meta["forest_plot_images"] for p in plots)


def assert_synthesis_traceable(text: str, draft: Path, store) -> None:
    """Issue 27: the title states the goal's review question and its main comparison; the main comparison (PPI vs
    H2-receptor antagonist, healing of erosive oesophagitis) has a pooled risk ratio with CI and I² and a forest plot;
    its participants are the arm totals of its trials; every number is tied to a sentence of the cited abstract."""
    title = text.splitlines()[0]
    assert title.startswith("# Systematic review: proton pump inhibitors in gastroesophageal reflux ("), title
    assert (
        "main comparison: proton pump inhibitors versus H2-receptor antagonists for healing in erosive oesophagitis"
        in title
    )
    assert "Review question: P: gastroesophageal reflux · I: proton pump inhibitor · C: any comparator" in text
    results = section(text, "Results of syntheses")
    main = re.search(r"\*\*proton pump inhibitor vs H2-receptor antagonist in erosive oesophagitis: healing at (\d+) weeks\.\*\* "
                     r"(\d+) trials ((?:\[PMID:\d+\] )+)with (\d+) participants.*?Pooled risk ratio (\d+\.\d+) \(95% CI "
                     r"(\d+\.\d+) to (\d+\.\d+);.*?Heterogeneity: I² (\d+)%", results, re.S)  # fmt: skip
    assert main, results[:500]
    weeks, trials, participants = main.group(1), int(main.group(2)), int(main.group(4))
    cited = [int(p) for p in re.findall(r"\[PMID:(\d+)\]", main.group(3))]
    assert trials >= 2 and len(cited) == trials and float(main.group(6)) < float(main.group(5)) < float(main.group(7))
    forest = re.search(r"\]\((sr_draft_[\w-]+_forest_proton_pump_inhibitor_vs_h2_receptor_antagonist_in_erosive_oesophagitis_"
                       r"healing_at_" + weeks + r"_weeks\.png)\)", results)  # fmt: skip
    assert forest and (draft.parent / forest.group(1)).read_bytes()[:4] == b"\x89PNG"
    rows = re.findall(r"^\| \[PMID:(\d+)\] \| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \| (\d+)/(\d+) \| ([^|]+) \| ([^|]+) \|$",
                      section(text, "Results of individual studies"), re.M)  # fmt: skip
    assert len(rows) >= 8
    # the main estimate's participants are the arm totals its trials give for healing at that time point
    arms = [(int(pmid), int(t)) for pmid, condition, _arm, outcome, time, _e, t, _s, _by in rows
            if int(pmid) in cited and outcome.strip() == "healing" and time.strip() == f"{weeks} wk"]  # fmt: skip
    # (a trial may also report a per-protocol set or a third arm: the pooled estimate takes one set per trial, ITT first)
    assert {p for p, _ in arms} == set(cited) and participants <= sum(t for _, t in arms)
    assert {c.strip() for p, c, *_ in rows if int(p) in cited} == {"erosive oesophagitis"}
    for pmid, _condition, _arm, _outcome, _time, events, total, source, extractor in rows:
        assert extractor.strip() == "rules:arm-numbers-v5.1"
        abstract = " ".join(store.paper(int(pmid)).abstract.split())
        sentence, _, size = source.strip().partition(" — arm size: ")
        assert sentence.rstrip("…") in abstract, (pmid, sentence)  # quoted from the cited abstract
        e, t = int(events), int(total)
        stated = re.search(rf"\b{e}\s*(?:\(\d+(?:\.\d+)?%\)\s*)?(?:/|of|out of)\s*(?:the\s+)?{t}\b", sentence)
        words = f"{NUMBER_WORDS[e]} of {NUMBER_WORDS[t]}" if max(e, t) < len(NUMBER_WORDS) else None  # "six of seven"
        stated = stated or (words is not None and words in sentence.lower())
        lists = re.findall(r"(?:\d+(?:\.\d+)?\s*%?\s*(?:,|and|vs\.?|-)\s*)*\d+(?:\.\d+)?\s*%", sentence)  # "95 and 94%"
        percent = [float(p) for found in lists for p in re.findall(r"\d+(?:\.\d+)?", found)]
        derived = any(round(100 * e / t, len(str(p).partition(".")[2]) if p % 1 else 0) == p for p in percent)
        whole = re.compile(rf"(?<![\d.]){t}(?![\d.])")  # the total as a whole number, not inside another
        spelt = bool(size) and size.rstrip("…") in abstract  # an arm size in words ("Two hundred and eighty-two")
        assert stated or (derived and (whole.search(size) or whole.search(sentence) or spelt)), (pmid, events, total,
                                                                                                source)  # fmt: skip
