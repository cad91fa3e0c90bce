"""PICO field terms: per P/I/C/O field, the terms frequent in one set of PICO records and not dominant in another
(what propose_alternative_pico's rule path and the SR draft's objective read)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ra_agent.evidence.pico.extract import PicoRecord
from ra_agent.topics.audit import distinctive_terms

PICO_FIELDS = ("P", "I", "C", "O")
# words that name doses, schedules, arms or study mechanics rather than a population, treatment or outcome
GENERIC_PICO_WORDS = frozenset(
    "mg mcg µg ml kg daily day days week weeks month months year years twice once dose doses dosing bid od qd tid "
    "patients patient subjects participants people group groups arm arms randomized randomised study studies trial "
    "trials mean versus vs compared comparison hours hour h min treatment treated therapy regimen regimens given "
    "received receiving oral orally intravenous iv total rate rates efficacy effect effects results "
    "double-blind single-blind open-label placebo-controlled once-daily twice-daily low high".split()
)


def has_word(text: str, term: str) -> bool:
    return re.search(r"\b" + re.escape(term.lower()) + r"\b", text.lower()) is not None


def _share(values: Sequence[str], term: str) -> float:
    return sum(has_word(v, term) for v in values) / len(values) if values else 0.0


def pico_field_terms(
    records: Sequence[PicoRecord], contrast: Sequence[PicoRecord], n_terms: int
) -> dict[str, list[str]]:
    """Per P/I/C/O field, up to `n_terms` terms frequent in `records` and not dominant in `contrast`.

    Terms are class-based TF-IDF terms of the field values (cluster.distinctive_terms: records vs
    contrast), without dose/schedule/arm/blinding words (GENERIC_PICO_WORDS), kept only when more of `records`
    than of `contrast` mention them. With no contrast this is plain document frequency.
    """
    out: dict[str, list[str]] = {}
    for name in PICO_FIELDS:
        mine = [getattr(r, name) for r in records]
        theirs = [getattr(r, name) for r in contrast]
        labels = np.array([0] * len(mine) + [-1] * len(theirs))
        ranked = distinctive_terms([*mine, *theirs], labels, 1, n_terms * 10)[0] if any(mine) else []
        picked: list[str] = []
        for term in ranked:
            words = term.lower().split()
            if any(w in GENERIC_PICO_WORDS or len(w) < 3 for w in words):
                continue
            share = _share(mine, term)
            if share * len(mine) < 2 or share <= _share(theirs, term):
                continue
            picked.append(term)
            if len(picked) == n_terms:
                break
        out[name] = picked
    return out
