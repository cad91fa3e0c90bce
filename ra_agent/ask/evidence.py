"""Which retrieved papers `ra ask` cites first: an honest rule over each paper's design and the treatments it names.

For a comparative question ("is A better than B", "A versus B", "A compared with B") the two named treatments are
read off the question; a paper naming both in its title (or, weaker, in its abstract) is a head-to-head source.
Every paper's design comes from ra's PICO rules (publication types, title and text cues): systematic reviews and
meta-analyses, then randomised trials, then other trials and studies, then narrative reviews and opinion. The
ranking adds `[ask] evidence_weight` x the design's level and `[ask] head_to_head_bonus` to the cosine; both at 0
give the plain similarity order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ra_agent.models import Paper

RULE_NAME = "rules:ask-evidence-v1"

# Evidence level per design class (ra's PICO design classes); unknown designs sit between trials and opinion.
DESIGN_LEVEL = {
    "meta-analysis": 1.0,
    "systematic review": 1.0,
    "RCT": 0.9,
    "controlled trial": 0.6,
    "clinical trial": 0.5,
    "cohort": 0.3,
    "case-control": 0.3,
    "cross-sectional": 0.2,
    "observational study": 0.3,
    "guideline": 0.4,
    "narrative review": 0.1,
    "case report": 0.0,
    "editorial": 0.0,
    "letter": 0.0,
    "comment": 0.0,
}
UNKNOWN_LEVEL = 0.25
STEM = 6  # the last letters that carry a drug's INN stem ("-razole", "-tidine"), for "a third treatment"

_COMPARE = re.compile(
    r"^(?P<a>.+?)\s+(?:better than|superior to|more effective than|less effective than|worse than|inferior to|"
    r"as (?:effective|good|safe) as|versus|vs\.?|compared (?:with|to)|or)\s+(?P<b>[A-Za-z][\w\-]+)",
    re.I,
)
_LEAD = re.compile(r"^(?:is|are|does|do|should|can|which|what|how|was|were)\s+(?:the\s+)?", re.I)


@dataclass(frozen=True)
class Comparison:
    """The two treatments a comparative question names (lower-case word stems)."""

    a: str
    b: str

    def names_both(self, text: str) -> bool:
        low = text.lower()
        return _mentions(low, self.a) and _mentions(low, self.b)

    def names_another(self, text: str) -> bool:
        """True when `text` also names a third treatment of the same stem (INN naming: "lansoprazole" beside
        esomeprazole and omeprazole, "famotidine" beside ranitidine): a three-arm or a different comparison."""
        stems = {w[-STEM:] for w in (self.a, self.b) if len(w) > STEM + 2}
        named = {self.a, self.b}
        return any(w[-STEM:] in stems and w not in named for w in re.findall(r"[a-z][a-z\-]+", text.lower()))


def _mentions(text: str, name: str) -> bool:
    return all(re.search(rf"\b{re.escape(w[:7])}", text) for w in name.split())


def comparison(question: str) -> Comparison | None:
    """The two treatments of a comparative question, or None (a question that compares nothing)."""
    m = _COMPARE.search(question.strip())
    if not m:
        return None
    subject = [w for w in re.findall(r"[A-Za-z][\w\-]+", _LEAD.sub("", m.group("a").strip())) if len(w) > 2]
    if not subject:
        return None
    one, two = subject[0].lower(), m.group("b").lower()
    return Comparison(one, two) if one != two else None


def design_of(paper: Paper) -> str:
    """The design class ra's PICO rules give the paper ("" when they find none)."""
    from ra_agent.evidence.pico.design import design_class, find_design
    from ra_agent.evidence.pico.text import Doc

    found = find_design(Doc(paper))
    return design_class(found.value) if found else ""


def design_label(paper: Paper) -> str:
    """The design as shown beside a citation ("RCT", "systematic review", "design not stated")."""
    return design_of(paper) or "design not stated"


def evidence_score(paper: Paper, compared: Comparison | None, *, weight: float, head_to_head: float) -> float:
    """What the rule adds to a paper's cosine: its design level, and a head-to-head bonus for a comparison
    (the whole bonus when the title names both treatments, half when only the abstract does)."""
    level = DESIGN_LEVEL.get(design_of(paper), UNKNOWN_LEVEL)
    bonus = 0.0
    if compared is not None:
        if compared.names_both(paper.title or ""):
            bonus = head_to_head / 2 if compared.names_another(paper.title or "") else head_to_head
        elif compared.names_both(paper.abstract or ""):
            bonus = head_to_head / 2
    return weight * level + bonus


__all__ = [
    "DESIGN_LEVEL",
    "RULE_NAME",
    "Comparison",
    "comparison",
    "design_label",
    "design_of",
    "evidence_score",
]
