"""MeSH headings as indexed: a descriptor with its subheadings and major-topic stars, and what a subheading says
about the condition's role in the record (treated or prevented, or an adverse effect of what the record studies).

`Paper.mesh_terms` keeps the headings in MEDLINE's MH form ("Sleep Initiation and Maintenance Disorders/*chemically
induced"); records whose source gave bare descriptors have none, and the rules here then say nothing rather than
guess. The subheadings are NLM's (MeSH Qualifiers): "drug therapy", "therapy", "prevention & control", "surgery",
... say the record is about treating or preventing the condition; "chemically induced" without them says the
condition is an adverse effect of what the record studies (insomnia in a trial of an antidepressant for depression).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ra_agent.models import Paper

# NLM subheadings saying the record treats or prevents the condition
TREATED = frozenset(
    "drug therapy|therapy|prevention & control|surgery|radiotherapy|rehabilitation|diet therapy|nursing".split("|")
)
# the subheading saying the condition is caused by a drug or chemical the record studies: an adverse effect
CAUSED = "chemically induced"


@dataclass(frozen=True)
class MeshTerm:
    """One indexed heading: descriptor, its subheadings, and which of them are major topics."""

    descriptor: str
    qualifiers: tuple[str, ...] = ()
    major: tuple[str, ...] = ()  # the starred parts: the descriptor itself and/or subheadings

    @classmethod
    def parse(cls, text: str) -> MeshTerm:
        """A MEDLINE MH line: "Venous Thrombosis/diagnostic imaging/*etiology", "*Fibrin"."""
        parts = [p.strip() for p in text.split("/") if p.strip()]
        if not parts:
            return cls("")
        names = [p.lstrip("*").strip() for p in parts]
        major = tuple(n for p, n in zip(parts, names, strict=True) if p.startswith("*"))
        return cls(names[0], tuple(q.lower() for q in names[1:]), major)

    @property
    def is_major(self) -> bool:
        return bool(self.major)

    @property
    def role(self) -> str:
        """ "treated" (a treatment or prevention subheading), "caused" (chemically induced and not treated: an
        adverse effect of what the record studies), or "" (the subheadings say neither)."""
        if any(q in TREATED for q in self.qualifiers):
            return "treated"
        return "caused" if CAUSED in self.qualifiers else ""

    def text(self) -> str:
        """The heading as indexed, e.g. "Hypertension/chemically induced"."""
        return "/".join([self.descriptor, *self.qualifiers])


def terms(paper: Paper) -> list[MeshTerm]:
    """The record's indexed headings with subheadings (empty when its source gave bare descriptors)."""
    return [t for t in (MeshTerm.parse(x) for x in paper.mesh_terms) if t.descriptor]


def roles(paper: Paper, descriptors: Iterable[str]) -> dict[str, str]:
    """Of the given descriptors the record carries: descriptor -> its role ("treated", "caused", "")."""
    wanted = set(descriptors)
    out: dict[str, str] = {}
    for term in terms(paper):
        if term.descriptor in wanted:
            role = term.role
            out[term.descriptor] = "treated" if "treated" in (role, out.get(term.descriptor)) else role
    return out
