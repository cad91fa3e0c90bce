"""The condition a trial studies, read from its title, PICO population, MeSH headings and abstract (rules).

A comparison is pooled within one condition: healing of a duodenal ulcer and healing of erosive oesophagitis are
different outcomes even when the drugs compared are the same. `condition_of` reads a general vocabulary of
conditions (`CONDITIONS`, each named after its MeSH heading, most specific first) in this order:
- the title, then the PICO population field, then the MeSH headings: the most specific condition each names
  (a title naming "Helicobacter pylori-associated duodenal ulcer" is a duodenal-ulcer trial);
- then the abstract: the condition it names first;
- else the words after "patients with" in the PICO population field ("patients with chronic cough" → "chronic
  cough"), else "condition not stated".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

NOT_STATED = "condition not stated"


@dataclass(frozen=True)
class Condition:
    label: str  # how drafts name it
    mesh: str  # the MeSH heading it stands for
    pattern: re.Pattern[str]


def _condition(label: str, mesh: str, *patterns: str) -> Condition:
    return Condition(label, mesh, re.compile(r"\b(?:" + "|".join(patterns) + r")", re.I))


# Most specific first: a record naming two of them is read as the first.
CONDITIONS: tuple[Condition, ...] = (
    _condition("Zollinger-Ellison syndrome", "Zollinger-Ellison Syndrome", r"zollinger"),
    _condition("bleeding peptic ulcer", "Peptic Ulcer Hemorrhage",
               r"(?:bleeding|h(?:a)?emorrhag\w*) (?:peptic |gastric |duodenal )?ulcers?",
               r"ulcer (?:bleeding|h(?:a)?emorrhage)", r"upper gastrointestinal (?:bleeding|h(?:a)?emorrhage)"),
    _condition("stress ulcer", "Stress ulcer (Peptic Ulcer)", r"stress[- ](?:related )?(?:ulcer|mucosal)"),
    _condition("peptic ulcer", "Peptic Ulcer", r"peptic ulcer", r"gastroduodenal ulcer",
               r"(?:gastric|duodenal) (?:and|or) (?:gastric|duodenal) ulcer"),
    _condition("duodenal ulcer", "Duodenal Ulcer", r"duodenal ulcer", r"ulcers? of the duodenum"),
    _condition("gastric ulcer", "Stomach Ulcer", r"gastric ulcer", r"stomach ulcer", r"benign gastric ulcer"),
    _condition("Barrett's oesophagus", "Barrett Esophagus", r"barrett"),
    _condition("non-erosive reflux disease", "Gastroesophageal Reflux", r"non-?erosive", r"endoscopy-negative",
               r"(?:normal|negative) endoscop\w*", r"without (?:endoscopic )?(?:evidence of )?(?:erosive )?o?esophagitis"),
    _condition("erosive oesophagitis", "Esophagitis, Peptic", r"(?:erosive |reflux |peptic |ulcerative )?o?esophagitis",
               r"o?esophageal (?:erosions?|ulcers?)", r"erosive (?:GERD|GORD|(?:gastro-?o?esophageal )?reflux)"),
    _condition("gastro-oesophageal reflux disease", "Gastroesophageal Reflux", r"gastro-?o?esophageal reflux",
               r"GERD", r"GORD", r"reflux disease", r"heartburn", r"acid reflux"),
    _condition("Helicobacter pylori infection", "Helicobacter Infections", r"(?:helicobacter|h\.?) pylori"),
    _condition("dyspepsia", "Dyspepsia", r"dyspeps\w*"),
)  # fmt: skip

_PATIENTS_WITH = re.compile(r"\b(?:patients|subjects|adults|children|people|participants) (?:with|having) "
                            r"((?:[\w'-]+ ){0,3}?[\w'-]+)(?=$|[,.;(]| and | who | in | treated | undergoing )", re.I)  # fmt: skip


def _most_specific(text: str) -> str | None:
    return next((c.label for c in CONDITIONS if c.pattern.search(text or "")), None)


def _first_named(text: str) -> str | None:
    found = [(m.start(), i) for i, c in enumerate(CONDITIONS) if (m := c.pattern.search(text or ""))]
    return CONDITIONS[min(found)[1]].label if found else None


def condition_of(title: str, population: str = "", mesh: Iterable[str] = (), abstract: str = "") -> str:
    """The condition a trial studies (see the module docstring); NOT_STATED when none is read."""
    for text in (title, population, "; ".join(mesh)):
        if found := _most_specific(text):
            return found
    if found := _first_named(abstract):
        return found
    if m := _PATIENTS_WITH.search(population or ""):
        return m.group(1).lower()
    return NOT_STATED
