"""Which records are reviews: the offline rule over publication types, title/abstract cues and journal."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from ra_agent.models import Paper

REVIEW_PUB_TYPES = ("Systematic Review", "Meta-Analysis", "Review")
# "systematic overview" and "overview of randomised trials": the older names of a systematic review of trials
REVIEW_TEXT_CUE = re.compile(r"\bsystematic(?:\s+literature)?\s+(?:reviews?|overviews?)\b"
                             r"|\bmeta[\s-]?analy(?:sis|ses|tic)\b"
                             r"|\boverview of (?:the )?(?:randomi[sz]ed|controlled|clinical) (?:\w+ )?trials\b",
                             re.I)  # fmt: skip
REVIEW_JOURNAL = re.compile(r"cochrane database", re.I)
# a title that names itself a review ("Rabeprazole: a review of its use in ...", "a literature review", a drug
# profile's "Quinapril: an update of its pharmacology and therapeutic use"): drug profiles
# and narrative reviews often carry no publication type in an export; never a trial's report, and not a systematic
# review that could cover a question either (not_trials.not_a_trial_report)
REVIEW_TITLE_CUE = re.compile(r"^reviews?\b|\breview of\b|"
                              r"\b(?:a|an|systematic|critical|narrative|literature|updated?)\s+(?:\w+\s+)?review\b"
                              r"|\ban update of its\b|\bits pharmacology\b", re.I)  # fmt: skip


def review_reason(paper: Paper) -> str | None:
    """Why a paper counts as a review offline, or None.

    Offline rule: a paper is a review when its publication types include Systematic Review,
    Meta-Analysis or Review, or its title or abstract says "systematic review(s)" /
    "systematic literature review" or "meta-analysis/analyses/analytic" (also spelt
    "meta analysis", "metaanalysis").
    """
    return cue_reason(paper, REVIEW_PUB_TYPES, REVIEW_TEXT_CUE)


def cue_reason(paper: Paper, pub_types: Iterable[str], text_cue: re.Pattern, mesh: Iterable[str] = ()) -> str | None:
    """The first cue a record carries, as a reason: one of `pub_types` among its publication types, then one of
    `mesh` among its MeSH headings, then `text_cue` in its title or abstract; None when it carries none."""
    for pub_type in pub_types:
        if pub_type in paper.pub_types:
            return f"publication type {pub_type}"
    for heading in mesh:
        if heading in paper.mesh:
            return f"MeSH {heading}"
    for where, text in (("title", paper.title), ("abstract", paper.abstract)):
        match = text_cue.search(text or "")
        if match:
            return f"{where} says {match.group(0)!r}"
    return None


# PubMed prints an erratum's wrong title words beside the corrected ones ("Double-blind comparison [correction of
# Double-blind, placebo-controlled comparison] of rabeprazole 20 mg vs. omeprazole ..."): the rules read the title
# without them
CORRECTION_OF = re.compile(r"\s*\[correction of [^\]]*\]", re.I)


def as_read(paper: Paper) -> Paper:
    """The record as the rules read it (whether it is a review, a trial, in the handbook's scope): its title without
    an erratum's "[correction of ...]" words. Reports show the title as PubMed gives it."""
    if CORRECTION_OF.search(paper.title or ""):
        return replace(paper, title=CORRECTION_OF.sub("", paper.title))
    return paper


def is_review(paper: Paper) -> str | None:
    """Why a record is a review (`review_reason` of its title as read, or a Cochrane Database journal), or None."""
    reason = review_reason(as_read(paper))
    if reason is None and REVIEW_JOURNAL.search(paper.journal or ""):
        reason = f"journal {paper.journal!r}"
    return reason
