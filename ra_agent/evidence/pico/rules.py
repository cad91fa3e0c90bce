"""Deterministic PICO cues over what PubMed records carry: publication types, MeSH, section labels and sentences."""

from __future__ import annotations

from ra_agent.evidence.pico.arms import find_arms
from ra_agent.evidence.pico.design import find_design
from ra_agent.evidence.pico.outcome import find_outcome
from ra_agent.evidence.pico.population import find_age, find_population, find_sample_size
from ra_agent.evidence.pico.text import Doc, Found, _clip_words
from ra_agent.models import Paper

RULES_NAME = "rules:pico-cues-v3"


# --------------------------------------------------------------------------- all fields


def extract(paper: Paper) -> dict[str, Found]:
    """Every field the cues can justify for one paper (absent keys: nothing found)."""
    doc = Doc(paper)
    i_found, c_found = find_arms(doc)
    found = {
        "P": find_population(doc),
        "I": i_found,
        "C": c_found,
        "O": find_outcome(doc),
        "StudyDesign": find_design(doc),
        "PopulationAge": find_age(doc),
        "SampleSize": find_sample_size(doc),
    }
    if "Setting" in doc.labelled:
        found["Setting"] = Found(_clip_words(doc.labelled["Setting"], 20), "section: SETTING")
    return {k: v for k, v in found.items() if v is not None and v.value}
