"""The PRISMA 2020 checklist (27 items) of ra's own SR draft: each item met or missing, read off the draft's text."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ra_agent.evidence.prisma.check import PRISMA_ITEMS, rule_evidence
from ra_agent.topics.metrics import markdown_table

# Everything after this line in a draft (the PRISMA check and the checklist) is not part of the text that is
# checked: a checklist that names "Search strategy" must not count as reporting one.
CHECKLIST_MARKER = "<!-- ra: PRISMA check and checklist below; not part of the checked draft text -->"

# PRISMA 2020 checklist (Page et al., BMJ 2021;372:n71): item -> (section, topic). Items 4-10 are detected by
# the PRISMA_ITEMS text cues (what prisma_check reads); the others by the draft heading that reports them.
PRISMA_2020: dict[int, tuple[str, str]] = {
    1: ("Title", "Title"), 2: ("Abstract", "Abstract"), 3: ("Introduction", "Rationale"),
    4: ("Introduction", "Objectives"), 5: ("Methods", "Eligibility criteria"),
    6: ("Methods", "Information sources"), 7: ("Methods", "Search strategy"), 8: ("Methods", "Selection process"),
    9: ("Methods", "Data collection process"), 10: ("Methods", "Data items"),
    11: ("Methods", "Study risk of bias assessment"), 12: ("Methods", "Effect measures"),
    13: ("Methods", "Synthesis methods"), 14: ("Methods", "Reporting bias assessment"),
    15: ("Methods", "Certainty assessment"), 16: ("Results", "Study selection"),
    17: ("Results", "Study characteristics"), 18: ("Results", "Risk of bias in studies"),
    19: ("Results", "Results of individual studies"), 20: ("Results", "Results of syntheses"),
    21: ("Results", "Reporting biases"), 22: ("Results", "Certainty of evidence"), 23: ("Discussion", "Discussion"),
    24: ("Other information", "Registration and protocol"), 25: ("Other information", "Support"),
    26: ("Other information", "Competing interests"), 27: ("Other information", "Availability of data, code and other materials"),
}  # fmt: skip
_HEADINGS: dict[int, str] = {
    1: r"^# .*\bsystematic review\b",
    2: r"^## Abstract\b",
    3: r"^## (?:Introduction|Rationale)\b",
    11: r"^#{2,4} (?:Study )?risk of bias assessment\b",
    12: r"^#{2,4} Effect measures\b",
    13: r"^#{2,4} Synthesis methods\b",
    14: r"^#{2,4} Reporting bias assessment\b",
    15: r"^#{2,4} Certainty assessment\b",
    16: r"^#{2,4} Study selection\b",
    17: r"^#{2,4} (?:Study characteristics|Included (?:trials|studies))\b",
    18: r"^#{2,4} Risk of bias in studies\b",
    19: r"^#{2,4} Results of individual studies\b",
    20: r"^#{2,4} Results of syntheses\b",
    21: r"^#{2,4} Reporting biases\b",
    22: r"^#{2,4} Certainty of evidence\b",
    23: r"^## Discussion\b",
    24: r"^#{2,4} Registration and protocol\b",
    25: r"^#{2,4} Support\b",
    26: r"^#{2,4} Competing interests\b",
    27: r"^#{2,4} Availability of data\b",
}
_HEADING_RES = {item: re.compile(rx, re.I | re.M) for item, rx in _HEADINGS.items()}

# PRISMA 2020 sub-items of the synthesis: sub-item -> (section heading that reports it, topic, cue over that section's
# text). 13a-13f are read in "Synthesis methods", 20a-20d in "Results of syntheses".
SUB_ITEMS: dict[str, tuple[str, str, str]] = {
    "13a": ("Synthesis methods", "Eligibility for each synthesis", r"eligible for (?:a|each|the) synthesis"),
    "13b": ("Synthesis methods", "Data preparation for synthesis", r"\bconvert(?:ed|ing)?\b|missing summary statistics"),
    "13c": ("Synthesis methods", "Tabulation and display of results", r"forest plot|summary[- ]of[- ]findings table"),
    "13d": ("Synthesis methods", "Synthesis methods and rationale",
            r"random[- ]effects|fixed[- ]effect|DerSimonian|Paule-Mandel|meta-analys"),
    "13e": ("Synthesis methods", "Exploring heterogeneity", r"\bI²|\btau²|subgroup|meta-regression"),
    "13f": ("Synthesis methods", "Sensitivity analyses", r"sensitivity analys[ie]s\b.{0,60}?\b(?:re-estimated|repeated|excluding|leaving)"),
    "20a": ("Results of syntheses", "Characteristics and risk of bias of contributing studies",
            r"\d+ trials? .{0,400}?\d+ participants"),
    "20b": ("Results of syntheses", "Results of statistical syntheses", r"pooled risk ratio \d+\.\d+ \(95% CI"),
    "20c": ("Results of syntheses", "Investigations of heterogeneity", r"heterogeneity: I² \d+%"),
    "20d": ("Results of syntheses", "Sensitivity analyses", r"sensitivity analysis: .{0,120}?\d+\.\d+ \(95% CI"),
}  # fmt: skip
_SUB_RES = {k: re.compile(rx, re.I | re.S) for k, (_s, _t, rx) in SUB_ITEMS.items()}


def checked_text(markdown: str) -> str:
    """The part of a draft that reports the review (everything before CHECKLIST_MARKER)."""
    return markdown.split(CHECKLIST_MARKER, 1)[0]


@dataclass(frozen=True)
class ChecklistItem:
    item: int
    section: str
    topic: str
    met: bool
    where: str  # the cue or heading that reports it, or why it is missing


def prisma_checklist(markdown: str) -> list[ChecklistItem]:
    """Every PRISMA 2020 item, met when the draft's checked text reports it (cue for items 4-10, heading
    for the others); a missing item says so."""
    text = checked_text(markdown)
    cues = rule_evidence(text, sorted(PRISMA_ITEMS), "draft")
    out = []
    for item, (section, topic) in PRISMA_2020.items():
        if item in PRISMA_ITEMS:
            met, where = item in cues.found, cues.found.get(item, "no sentence reports it")
        else:
            match = _HEADING_RES[item].search(text)
            met, where = match is not None, (f"section {match.group(0).lstrip('#').strip()!r}" if match
                                             else "no section reports it")  # fmt: skip
        out.append(ChecklistItem(item, section, topic, met, where))
    return out


@dataclass(frozen=True)
class SubItem:
    item: str  # "13a"
    heading: str
    topic: str
    met: bool
    where: str


def _section_text(text: str, heading: str) -> str:
    match = re.search(rf"^(#+) {re.escape(heading)}\b.*?$", text, re.M)
    if not match:
        return ""
    rest = text[match.end() :]
    end = re.search(rf"^#{{1,{len(match.group(1))}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def clip(text: str, n: int) -> str:
    """`text` cut to `n` characters, without the piece of a PMID citation the cut would leave (it would cite another
    record)."""
    return text if len(text) <= n else re.sub(r"\[[^\]]*$|\bPMID\s*:?\s*\d*$", "", text[:n]).rstrip()


def prisma_subitems(markdown: str) -> list[SubItem]:
    """PRISMA 2020 synthesis sub-items 13a-13f and 20a-20d, met when the section that reports them states them."""
    text = checked_text(markdown)
    out = []
    for key, (heading, topic, _rx) in SUB_ITEMS.items():
        body = _section_text(text, heading)
        match = _SUB_RES[key].search(body)
        where = (f"section {heading!r}: '{clip(' '.join(match.group(0).split()), 80)}'" if match
                 else f"section {heading!r} does not state it" if body else f"no section {heading!r}")  # fmt: skip
        out.append(SubItem(key, heading, topic, match is not None, where))
    return out


def checklist_markdown(items: list[ChecklistItem], subitems: list[SubItem] | None = None) -> str:
    met = sum(i.met for i in items)
    rows = []
    for i in items:
        rows.append({"item": i.item, "section": i.section, "topic": i.topic, "status": "met" if i.met else "missing",
                     "where": clip(i.where, 160)})  # fmt: skip
        rows += [{"item": s.item, "section": i.section, "topic": s.topic, "status": "met" if s.met else "missing",
                  "where": clip(s.where, 160)} for s in subitems or [] if s.item.startswith(f"{i.item}") and
                 s.item[len(str(i.item)):].isalpha()]  # fmt: skip
    sub = (f"; synthesis sub-items {sum(s.met for s in subitems)} of {len(subitems)} met (13a-13f, 20a-20d: cues "
           "over the section that reports them)") if subitems else ""  # fmt: skip
    return (f"{met} of {len(items)} PRISMA 2020 items met (rules over the draft text: cues for items 4-10, "
            f"section headings for the others){sub}.\n\n" + markdown_table(rows, ("item", "section", "topic", "status", "where")))  # fmt: skip
