"""Reports of a randomised trial that are not reports of its effects: a protocol, an instrument's validation, an
economic evaluation, a diagnostic-accuracy study, a narrative review, an analysis of prognosis or association, a
commentary, baseline data, a pooled analysis of several trials (rules over title, abstract, MeSH major topics and
publication types; `trials.eligibility` turns such a record down with the reason)."""

from __future__ import annotations

import re

from ra_agent.evidence.questions import mesh
from ra_agent.evidence.questions.reviews import REVIEW_TITLE_CUE
from ra_agent.models import Paper

# A protocol's abstract speaks of what will happen ("participants will be randomised"), a report's of what did
FUTURE_TENSE = re.compile(r"\bwill be (?:randomi[sz]ed|allocated|assigned|recruited|enrolled)\b", re.I)
RESULT_WORDS = re.compile(r"\bresults?\b|\bwere (?:significantly|more|less|similar)\b|\bp\s*[<=>]|\bconclu\w+", re.I)
# Reports of a trial that are not reports of its effects: an instrument's validation (a questionnaire's
# reliability, validity or responsiveness measured on a trial's participants), an economic evaluation, a
# diagnostic-accuracy study (title words; the MeSH headings NLM gives such reports)
INSTRUMENT = re.compile(r"\bvalidat(?:ion|ing|e)\b|\bvalidity\b|\breliability\b|\bpsychometric\w*|\bresponsiveness\b"
                        r"|\bmeasurement properties\b|\bminimal(?:ly)? (?:clinically )?important (?:difference|change)\b",
                        re.I)  # fmt: skip
ECONOMIC = re.compile(r"\bcosts?\b|\bcost[- ](?:effective\w*|utility|benefit|analys\w*|minimi[sz]ation|consequence\w*)"
                      r"|\beconomic\w*|\bpharmaco-?economic\w*|\bbudget impact\b|\bQALYs?\b", re.I)  # fmt: skip
ACCURACY = re.compile(r"\bdiagnostic (?:accuracy|performance|value)\b|\bsensitivity and specificity\b"
                      r"|\baccuracy of\b", re.I)  # fmt: skip
# A report of a trial's data that asks what predicts or goes with an outcome, not what the treatment did
PROGNOSIS = re.compile(r"\bprognostic (?:value|importance|implications?|significance|factors?|variables?)\b"
                       r"|\bpredictors? of\b|\b(?:does|do|did) not predict\b|\b(?:independently |strongly )?predicts\b"
                       r"|\bcorrelates of\b|\brelationships? (?:of|between)\b|\bassociations? between\b"
                       r"|\b(?:is|are|was|were) associated with\b|\balleles?\b|\bpolymorphisms?\b",
                       re.I)  # fmt: skip
# A report of who entered a trial, before any result: its baseline data or its recruitment
BASELINE = re.compile(r"\bbaseline (?:data|characteristics|findings|features|profile)\b"
                      r"|\bcharacteristics (?:of (?:the )?(?:study |trial )?(?:population|participants|patients"
                      r"|cohort) )?at baseline\b|\b(?:patient|participant|subject)s? recruitment\b"
                      r"|\brecruitment (?:and|of) (?:baseline|patients|participants|subjects)\b", re.I)  # fmt: skip
# An analysis of several trials' data pooled together: not one trial's report (and no systematic review either)
POOLED = re.compile(r"\bpooled (?:analys[ie]s|data|results)\b|\banalys[ie]s of (?:the )?pooled\b", re.I)
# Writing about a trial rather than its report: an update, its implications, lessons or experiences drawn from it
COMMENTARY = re.compile(r"\bimplications of\b|\btrials? update\b|\bprogress report\b|\blessons (?:from|learned)\b"
                        r"|\bexperiences? from\b|\bchallenges of\b|\bclinical trial of the month\b", re.I)  # fmt: skip
# An abstract that tells other authors' studies ("Bank et al. found ...; Ladas et al. found ...") reviews them
CITED_STUDY = re.compile(r"\b[A-Z][a-z]+(?:[- ][A-Z][a-z]+)? et al\b")
NOT_A_TRIAL_MESH = {"Psychometrics": "an instrument's validation", "Cost-Benefit Analysis": "an economic evaluation",
                    "Costs and Cost Analysis": "an economic evaluation", "Sensitivity and Specificity":
                    "a diagnostic-accuracy study"}  # fmt: skip


def not_a_trial_report(paper: Paper) -> str | None:
    """Why a randomised trial's report is not a report of its effects (see INSTRUMENT), or None."""
    title = paper.title or ""
    if "Clinical Trial Protocol" in paper.pub_types:
        return "a trial protocol (publication type Clinical Trial Protocol)"
    if FUTURE_TENSE.search(paper.abstract or "") and not RESULT_WORDS.search(paper.abstract or ""):
        return "a trial protocol (the abstract says what will be done, and gives no results)"
    for pattern, what in ((INSTRUMENT, "an instrument's validation"), (ECONOMIC, "an economic evaluation"),
                          (ACCURACY, "a diagnostic-accuracy study"), (REVIEW_TITLE_CUE, "a narrative review"),
                          (PROGNOSIS, "an analysis of prognosis or association"), (COMMENTARY, "a commentary"),
                          (BASELINE, "a report of baseline data (no results)"),
                          (POOLED, "a pooled analysis of several trials")):  # fmt: skip
        if match := pattern.search(title):
            return f"{what} (title says {match.group(0)!r})"
    for heading, what in NOT_A_TRIAL_MESH.items():
        if any(t.descriptor == heading and t.is_major for t in mesh.terms(paper)):
            return f"{what} (major MeSH topic {heading})"
    if len(cited := list(dict.fromkeys(m.group(0) for m in CITED_STUDY.finditer(paper.abstract or "")))) >= 2:
        return f"a narrative review (its abstract tells other authors' studies: {cited[0]!r}, {cited[1]!r})"
    return None
