"""Studies, not reports: the reports of one trial (its main paper, secondary analyses, follow-ups, companion
papers) grouped under one study, as reviewers count them.

Two reports are of one study when (rules over real fields, each link kept with its reason):
- they carry the same trial registration number (NCT, ISRCTN, ACTRN, EudraCT, ChiCTR, DRKS, UMIN, CTRI, NTR, IRCT,
  JPRN, KCT, PACTR: in the abstract, or PubMed's DataBankList kept in `other_ids["registration"]`);
- they name the same trial acronym ("the WARP trial", "(WARP): an open-label randomised trial"; a parenthesised
  abbreviation whose letters are the initials of the words before it is an abbreviation, not a trial's name);
- they share at least two authors and an agent they test, and one of them says it reports on a trial already run
  (a secondary, post hoc, subgroup or follow-up analysis; "patients included in a randomised study") or both state
  the same number of randomised participants.
A study is named by its first report (earliest year, then lowest PMID); its year is that report's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ra_agent.models import Paper

REGISTRATION = re.compile(
    r"\b(NCT\s?\d{8}|ISRCTN\s?\d{8}|ACTRN\d{14}|ChiCTR[-A-Z0-9]{8,}|DRKS\d{8}|UMIN\d{9}|NTR\d{3,5}|IRCT\d{6,}N?\d*"
    r"|KCT\d{7}|PACTR\d{15}|JPRN-[A-Za-z]+\d+|CTRI/\d{4}/\d{2,3}/\d{6}|\d{4}-\d{6}-\d{2})\b"
)
ACRONYM_NAMED = re.compile(r"\b(?:the\s+)?([A-Z][A-Z0-9]{2,}(?:-[A-Z0-9]+)*)\s+(?:trial|study|Trial|Study|investigators"
                           r"|Investigators|Study Group|study group)\b")  # fmt: skip
ACRONYM_PAREN = re.compile(r"\(([A-Z][A-Z0-9]{2,}(?:-[A-Z0-9]+)*)\)")
# acronyms that name a design or a field, not one trial
GENERIC_ACRONYMS = frozenset("RCT RCTS CT CCT PROBE MRI USA UK EU WHO NIH FDA HIV AIDS ICU QOL HRQOL ITT".split())
SECONDARY = re.compile(
    r"\b(?:secondary|post[- ]hoc|subgroup|sub-?group|ancillary|exploratory|pooled|follow-?up|extension|long[- ]term)"
    r" (?:analys[ie]s|results?|data|study|phase|of)\b|\bsub-?stud(?:y|ies)\b|\bsubanalys[ie]s\b"
    r"|\b(?:patients|participants|subjects) (?:included|enrolled|randomi[sz]ed) in (?:a|the|our) (?:[\w-]+,? ){0,4}"
    r"(?:trial|study)\b|\bdata (?:from|of) (?:a|the) (?:[\w-]+,? ){0,4}(?:trial|study)\b",
    re.I,
)
RANDOMISED_N = re.compile(
    r"\b(\d{2,5})\s+(?:[\w-]+\s+){0,3}?(?:patients|participants|subjects|women|men|children|adults|people|individuals|"
    r"volunteers)\s+(?:\w+\s+){0,3}?(?:were\s+)?(?:randomi[sz]ed|randomly (?:assigned|allocated)|enrolled)"
    r"|\brandomi[sz]ed\s+(\d{2,5})\s+(?:[\w-]+\s+){0,2}?(?:patients|participants|subjects)",
    re.I,
)


@dataclass
class Study:
    """One trial and its reports: `id` ("s-" + its first report's PMID), the reports' PMIDs (first report first)
    and why they were grouped."""

    id: str
    reports: list[int]
    year: int | None
    links: list[str] = field(default_factory=list)  # "PMID a ~ PMID b: same registration NCT01234567"

    @property
    def first(self) -> int:
        return self.reports[0]

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "reports": self.reports, "year": self.year, "links": self.links}


def registrations(paper: Paper) -> set[str]:
    """The trial registration numbers a record carries (abstract, title, PubMed's DataBankList)."""
    found = set(REGISTRATION.findall(f"{paper.title} {paper.abstract}"))
    found |= {r for r in (paper.other_ids.get("registration") or "").split(";") if r}
    return {r.upper().replace(" ", "") for r in found}


def _initials_of(acronym: str, before: str) -> bool:
    words = re.findall(r"[A-Za-z]+", before)[-len(acronym) - 2 :]
    letters = "".join(w[0] for w in words).upper()
    return bool(acronym) and acronym.replace("-", "")[:3] in letters


def acronyms(paper: Paper) -> set[str]:
    """The trial names (acronyms) a record gives its trial."""
    text = f"{paper.title} {paper.abstract}"
    found = {m.group(1) for m in ACRONYM_NAMED.finditer(text)}
    title = paper.title or ""
    for m in ACRONYM_PAREN.finditer(title):
        if re.search(r"\b(?:trial|study)\b", title, re.I) and not _initials_of(m.group(1), title[: m.start()]):
            found.add(m.group(1))
    return {a for a in found if a not in GENERIC_ACRONYMS and not a.isdigit()}


def author_keys(paper: Paper) -> set[str]:
    """Authors as "surname initial" ("M. Verso", "Verso M", "Verso, M." -> "verso m")."""
    out = set()
    for name in paper.authors:
        tokens = [t for t in re.split(r"[\s,]+", name.strip()) if t]
        initials = [t for t in tokens if re.fullmatch(r"(?:[A-Z]\.?-?){1,3}", t)]
        surname = " ".join(t for t in tokens if t not in initials).lower()
        if surname:
            out.add(f"{surname} {initials[0][0].lower() if initials else ''}".strip())
    return out


def randomised_n(paper: Paper) -> int | None:
    """The number of participants a record says were randomised or enrolled (its first statement of it)."""
    match = RANDOMISED_N.search(paper.abstract or "")
    return int(match.group(1) or match.group(2)) if match else None


def further_reports(studies: Sequence[Study], candidates: Sequence[Paper], papers: Sequence[Paper],
                    agents: Mapping[int, set[str]]) -> dict[int, tuple[Study, str]]:  # fmt: skip
    """Records that are reports of one of `studies` though not trial reports of their own (a secondary analysis
    indexed as being about a trial, a follow-up without the trial's design words): linked to a study's report by
    registration, trial name, or two shared authors with an agent they test and the record saying it reports on a
    trial already run. Returns PMID -> (study, why). `papers`: the studies' reports; `agents`: PMID -> agent words
    (for the candidates too)."""
    by_pmid = {p.pmid: p for p in papers}
    study_of = {r: s for s in studies for r in s.reports}
    out: dict[int, tuple[Study, str]] = {}
    for candidate in candidates:
        keys = registrations(candidate) | acronyms(candidate)
        cue = SECONDARY.search(f"{candidate.title} {candidate.abstract}")
        team = author_keys(candidate)
        for pmid, study in study_of.items():
            report = by_pmid.get(pmid)
            if report is None:
                continue
            same = sorted(keys & (registrations(report) | acronyms(report)))
            shared = team & author_keys(report)
            tests = agents.get(candidate.pmid, set()) & agents.get(pmid, set())
            if same:
                out[candidate.pmid] = (study, f"a further report of study {study.id} (same registration or name "
                                              f"{same[0]} as PMID {pmid})")  # fmt: skip
                break
            if cue and len(shared) >= 2 and tests:
                out[candidate.pmid] = (study, f"a further report of study {study.id} ({len(shared)} authors shared with "
                                              f"PMID {pmid}, both test {sorted(tests)[0]}, it says {cue.group(0)!r})")  # fmt: skip
                break
    return out


def group_studies(papers: Sequence[Paper], agents: Mapping[int, set[str]]) -> list[Study]:
    """The studies among `papers` (reports of eligible trials; `agents`: PMID -> the agent words each tests), each
    with its reports and the links that grouped them (module text), ordered by their first report."""
    by_pmid = {p.pmid: p for p in papers}
    parent = {p.pmid: p.pmid for p in papers}
    why: list[tuple[int, int, str]] = []

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def link(a: int, b: int, reason: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
            why.append((a, b, reason))

    for keyer, what in ((registrations, "same registration"), (acronyms, "same trial name")):
        seen: dict[str, int] = {}
        for paper in papers:
            for key in sorted(keyer(paper)):
                if key in seen:
                    link(seen[key], paper.pmid, f"{what} {key}")
                else:
                    seen[key] = paper.pmid
    authors = {p.pmid: author_keys(p) for p in papers}
    by_author: dict[str, list[int]] = {}
    for pmid, keys in authors.items():
        for key in keys:
            by_author.setdefault(key, []).append(pmid)
    pairs = {(a, b) for pmids in by_author.values() if len(pmids) < 50 for a in pmids for b in pmids if a < b}
    for a, b in sorted(pairs):
        shared = authors[a] & authors[b]
        if len(shared) < 2 or not (agents.get(a, set()) & agents.get(b, set())):
            continue
        pa, pb = by_pmid[a], by_pmid[b]
        cue = SECONDARY.search(f"{pa.title} {pa.abstract}") or SECONDARY.search(f"{pb.title} {pb.abstract}")
        n_a, n_b = randomised_n(pa), randomised_n(pb)
        if cue:
            link(a, b, f"{len(shared)} shared authors, both test {sorted(agents[a] & agents[b])[0]}; "
                       f"one reports on a trial already run ({cue.group(0)!r})")  # fmt: skip
        elif n_a is not None and n_a == n_b:
            link(a, b, f"{len(shared)} shared authors, both test {sorted(agents[a] & agents[b])[0]}, both randomised "
                       f"{n_a}")  # fmt: skip
    groups: dict[int, list[int]] = {}
    for pmid in parent:
        groups.setdefault(find(pmid), []).append(pmid)
    studies = []
    for members in groups.values():
        reports = sorted(members, key=lambda p: (by_pmid[p].year or 9999, p))
        links = [f"PMID {a} ~ PMID {b}: {r}" for a, b, r in why if find(a) == find(reports[0])]
        studies.append(Study(f"s-{reports[0]}", reports, by_pmid[reports[0]].year, links))
    return sorted(studies, key=lambda s: (s.year or 9999, s.first))
