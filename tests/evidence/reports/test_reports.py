"""A goal's gap dossier and SR draft of a review question read its set: every cited PMID exists, the studies and counts
are the set's, the PRISMA result never says "not compliant" over reviews it could not judge, the flow PNG, the draft
passes PRISMA, its Objectives name what its title compares and its sources are its records'."""

from __future__ import annotations

import re

import pytest

from evidence.conftest import HANDBOOK
from ra_agent.agent.questions import load_question_set
from ra_agent.evidence.prisma.check import check_draft, review_statuses, rule_evidence
from ra_agent.evidence.prisma.checklist import checked_text, prisma_checklist, prisma_subitems
from ra_agent.evidence.prisma.flow import prisma_flow
from ra_agent.evidence.questions.dossier import dossier_markdown
from ra_agent.evidence.reports.common import ReportError, cited_pmids, verify_citations
from ra_agent.evidence.reports.gap_dossier import gap_dossier
from ra_agent.evidence.reports.sr_draft import sr_draft
from ra_agent.llm.rules_brain import RulesBrain

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def section(markdown: str, title: str) -> str:
    """The body of the Markdown section whose heading ends with `title`, up to the next heading of that level."""
    match = re.search(rf"^(#+) {re.escape(title)}.*?$", markdown, re.M)
    assert match, title
    level = len(match.group(1))
    rest = markdown[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def topic_question(world):
    qset = load_question_set(world.cfg, world.store, HANDBOOK)  # stored by the template: read, not judged again
    return qset, qset.topic_question


def test_cited_pmids_and_verify_citations(demo, tmp_path):
    text = "Trials [PMID:10024259] and [PMID: 11421865]; see PMID 99999999."
    assert cited_pmids(text) == {10024259, 11421865, 99999999}
    path = tmp_path / "r.md"
    path.write_text(text)
    assert verify_citations(demo.store, path) == [99999999]


def test_the_gap_dossier_is_the_questions_dossier_and_the_goals_checks(demo):
    qset, question = topic_question(demo)
    brain = RulesBrain()
    covering = [r.pmid for r in question.reviews if r.share >= demo.cfg.sr.sr_overlap_pivot]
    prisma = review_statuses(demo.cfg, demo.store, covering, brain)
    path = gap_dossier(demo.cfg, demo.store, qset, question, goal_id="g-test", brain_name=brain.name, prisma=prisma)
    assert path == demo.cfg.data_dir / "reports" / f"gap_dossier_{question.id}.md"
    text = path.read_text(encoding="utf-8")
    assert verify_citations(demo.store, path) == [] and cited_pmids(text)
    lines = text.splitlines()
    assert lines[0] == f"# Evidence-gap dossier: {question.in_words}" and brain.name in lines[2]
    assert lines[4].startswith("Covered by ") and f"**Verdict: {question.verdict}.**" in text
    rows = re.findall(r"^\| (s-\d+) \| ", section(text, "Studies"), re.M)
    assert rows == list(question.studies)  # the set's studies, each once
    pico = re.findall(r"^\| \[PMID:(\d+)\]", section(text, "PICO of its studies"), re.M)
    assert [int(p) for p in pico] == [reports[0] for reports in question.studies.values()]
    checked = section(text, "PRISMA check of the covering review")
    assert "abstract only" in checked and "**not compliant**" not in checked  # undetermined reviews, said so
    assert "**undetermined**" in checked and prisma.compliance is None
    assert "PRISMA compliance of the covering reviews" not in section(text, "Not checked by this run")


def test_the_sr_draft_includes_the_questions_studies_and_passes_prisma(demo):
    qset, question = topic_question(demo)
    brain = RulesBrain()
    path = sr_draft(demo.cfg, demo.store, qset, question, goal_id="g-test", brain_name=brain.name, prisma=None)
    assert path.name == f"sr_draft_{question.id}.md"
    text = path.read_text(encoding="utf-8")
    assert verify_citations(demo.store, path) == []
    png = path.with_name(f"sr_draft_{question.id}_prisma_flow.png")
    assert png.read_bytes()[:8] == PNG_MAGIC and f"]({png.name})" in text
    # the flow's counts are the set's: every record judged, the reports eligible for the topic, the studies
    flow = prisma_flow(qset, question)
    assert flow.identified == demo.store.counts()["paper"]  # the corpus; the candidates the indexes return screened
    assert flow.screened == len(qset.eligibility) < flow.identified
    assert flow.excluded + flow.eligible_topic == flow.screened and flow.eligible_topic == qset.eligible_reports
    assert (flow.reports, flow.included) == (len(question.trials), len(question.studies))
    table = section(text, "Study selection")
    for row in flow.rows():
        assert f"| {row['stage']} | {row['n']} |" in table
    included = re.findall(r"^\| \[PMID:(\d+)\] \|", section(text, "Included studies"), re.M)
    assert [int(p) for p in included] == [r[0] for r in question.studies.values()]
    further = {p for reports in question.studies.values() for p in reports[1:]}
    assert all(f"[PMID:{p}]" in section(text, "Included studies") for p in further)  # under their study
    synthesis = section(text, "Synthesis of the abstracts")
    quoted = re.findall(r"^- \[PMID:(\d+)\] \(", synthesis, re.M)
    assert sorted(quoted) == sorted(included)  # every included study is quoted once, in one group
    first = int(quoted[0])
    found = re.search(rf"^- \[PMID:{first}\] \(\w+\): (.+)$", synthesis, re.M)
    paper = demo.store.paper(first)
    assert found and paper and found.group(1).rstrip("…")[:60] in paper.abstract  # quoted, not invented
    # the Objectives compare what the title compares; the sources are those of the question's records
    assert "in gastroesophageal reflux" in text.splitlines()[0]
    assert "effects of proton pump inhibitors compared with any comparator in people with gastroesophageal " \
        "reflux" in section(text, "Objectives")  # fmt: skip
    sources = section(text, "Information sources")
    assert "Cohen_2006_ProtonPumpInhibitors.csv" in sources and f"{len(question.trials)} of its reports" in sources
    # the draft reports PRISMA items 4-8, so a check of the draft (above its checklist) passes
    check = check_draft(demo.cfg, brain, checked_text(text))
    assert check.as_dict() == {"compliant": True, "missing_items": []} and check.source == "draft"
    # time points and summaries read as a reviewer writes them: "at 1 week", each comparison's summary naming its
    # comparator once and no clipped outcome phrase
    assert " 1 weeks" not in text and re.search(r"\bat 1 week\b", text)
    abstracts = section(text, "Synthesis of the abstracts")
    leads = re.findall(r"^#### (.+) \(\d+\)\n\n(.+)$", abstracts, re.M)
    assert leads and all("…" not in lead for _, lead in leads)
    assert all(" against " not in lead for heading, lead in leads if " vs " in heading)
    rationale = section(text, "Rationale")
    assert re.match(r"(?:1 review answers|\d+ reviews answer|No review of the local corpus answers) this question",
                    rationale.strip()) and "(s)" not in text, rationale  # fmt: skip
    # each item is quoted from the draft's section of that name, not from the first line carrying a cue word
    # (item 4 quoted the draft's italic header "Draft of review question ...")
    objectives = section(text, "Objectives").strip().split(". ")[0]
    assert check.evidence[4].startswith(f"draft: 'Objectives' in: Objectives: {objectives}"[:120]), check.evidence[4]
    assert check.evidence[8].startswith("draft: 'Selection process' in: Selection process: "), check.evidence[8]
    again = sr_draft(demo.cfg, demo.store, qset, question, goal_id="g-test", brain_name=brain.name, prisma=check)
    assert "**compliant**" in section(again.read_text(encoding="utf-8"), "PRISMA check")


def test_the_dossier_quotes_the_eligibility_statements_the_rules_do_not_apply(demo):
    """conduct_sr_ppi.md's "Trials only: exclude reviews, editorials, ... studies of *H. pylori* eradication or NSAID
    ulcers unless they report reflux outcomes" is eligibility the rules cannot apply: the dossier quotes it whole for
    the reviewer (it counted such statements only, and four of the demo handbook's were instructions to the agent)."""
    qset = load_question_set(demo.cfg, demo.store, HANDBOOK.with_name("conduct_sr_ppi.md"))
    question = qset.topic_question
    assert any(w.startswith("Trials only: exclude reviews") and "*H. pylori* eradication" in w
               for w in qset.scope_not_applied), qset.scope_not_applied  # fmt: skip
    assert not any(re.search(r"`\w+|\bclusters?\b", w) for w in qset.scope_not_applied)
    text = dossier_markdown(question, {p.pmid: p for p in demo.store.papers(question.trials)}, qset)
    assert all(f'  - "{words}"' in text for words in qset.scope_not_applied)
    assert not load_question_set(demo.cfg, demo.store, HANDBOOK).scope_not_applied


def test_the_sr_draft_checklist_is_read_off_the_draft_and_fill_states_missing_items(demo):
    qset, question = topic_question(demo)
    path = sr_draft(demo.cfg, demo.store, qset, question, goal_id="g", brain_name="b", prisma=None)
    text = path.read_text(encoding="utf-8")
    items = {i.item: i for i in prisma_checklist(text)}
    assert sorted(items) == list(range(1, 28))
    assert all(items[i].met for i in (1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 16, 17, 19, 20, 23, 24, 27))
    assert not any(items[i].met for i in (11, 14, 15, 18, 21, 22))  # never assessed: honestly missing
    sub = {s.item: s for s in prisma_subitems(text)}
    assert sorted(sub) == ["13a", "13b", "13c", "13d", "13e", "13f", "20a", "20b", "20c", "20d"]
    assert all(sub[k].met for k in ("13a", "13b", "13c", "13d", "13e"))  # the methods state each
    listed = path.with_name(f"sr_draft_{question.id}_prisma_checklist.md").read_text(encoding="utf-8")
    missing = sum(not i.met for i in items.values()) + sum(not s.met for s in sub.values())
    assert listed.count("| missing |") == missing == text.count("| missing |")
    # a draft without its Search strategy section misses item 7; fill=[7] states it from the search log
    body = checked_text(text)
    cut = re.sub(r"^### Search strategy.*?(?=^### )", "", body, flags=re.S | re.M)
    assert 7 in rule_evidence(cut, [7], "draft").missing
    filled = sr_draft(demo.cfg, demo.store, qset, question, goal_id="g", brain_name="b", prisma=None, fill=[7])
    statement = [
        line for line in filled.read_text(encoding="utf-8").splitlines() if line.startswith("Search strategy:")
    ]
    assert len(statement) == 1 and "published" in statement[0]


def test_reports_name_the_extractor_of_the_questions_pico(demo):
    """PICO written by run_pico for the question (the default extractor without an LLM: the learned tagger) is what
    the dossier's PICO table and the draft's data-collection item name."""
    from ra_agent.evidence.pico import learned
    from ra_agent.evidence.pico.extract import run_pico
    from ra_agent.evidence.pico.llm_extract import make_extractor
    from ra_agent.topics.view import pico_path

    qset, question = topic_question(demo)
    extractor = make_extractor(None, demo.cfg)
    assert extractor.name == learned.model_version()
    run = run_pico(demo.store.papers(question.trial_pmids), extractor, pico_path(demo.cfg, question.id))
    assert run.extractor_counts == {extractor.name: len(question.trials)}
    text = gap_dossier(demo.cfg, demo.store, qset, question, goal_id="g", brain_name="rules", prisma=None)
    pico = section(text.read_text(encoding="utf-8"), "PICO of its studies")
    assert f"`{question.id}.jsonl`" in pico and f"extractor: {extractor.name}" in pico
    draft = sr_draft(demo.cfg, demo.store, qset, question, goal_id="g", brain_name="rules", prisma=None)
    assert f"by {extractor.name} ({len(question.trials)})" in draft.read_text(encoding="utf-8")


def test_a_question_without_a_study_has_no_draft(demo):
    qset, _ = topic_question(demo)
    empty = next((q for q in qset.questions if not q.studies), None)
    if empty is None:  # every question of the demo has studies: make one with none from the topic's
        from dataclasses import replace

        empty = replace(qset.topic_question, studies={}, trials={}, verdict="too few trials", verdict_reason="0 < 6")
    with pytest.raises(ReportError, match="has no study"):
        sr_draft(demo.cfg, demo.store, qset, empty, goal_id="g", brain_name="b", prisma=None)
