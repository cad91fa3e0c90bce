"""Outcome rules: primary outcome cues, outcome lists and measured quantities."""

from __future__ import annotations

import re

from ra_agent.evidence.pico.population import POP_NOUN, _from_section, _left_modifiers
from ra_agent.evidence.pico.text import Doc, Found, _clip_words, _snippet

# --------------------------------------------------------------------------- outcome

_PRIMARY = re.compile(
    r"\b(?:primary|main|principal)\s+(?:efficacy\s+)?(?:end[- ]?points?|outcomes?(?:\s+measures?)?|criteri(?:on|a)|"
    r"variables?|parameters?|indicators? of efficacy|outcome variables?|measures?|efficacy (?:end[- ]?point|variable|parameter))"
    r"\s+(?:was|were|is|are|included|consisted of|being)\s+(?:the\s+|defined as\s+)?(?P<o>[^;]{3,200})",
    re.I,
)
_PRIMARY_AFTER = re.compile(
    r"(?:^|[,;:]\s+|\b(?:and|that)\s+)(?P<o>[^,;:]{3,160}?)\s+(?:was|were) (?:the|our) (?:primary|main) "
    r"(?:end[- ]?point|outcome|efficacy variable)",
    re.I,
)
_PRIMARY_AFTER_CUE = re.compile(r"\b(?:was|were) (?:the|our) (?:primary|main) (?:end[- ]?point|outcome|efficacy)", re.I)
_PRIMARY_PAREN = re.compile(
    r"\bto (?:assess|evaluate|compare|determine|examine|investigate|measure)\s+(?P<o>[^;]{3,160}?)\s*\((?:the\s+)?primary (?:end[- ]?point|outcome)\)",
    re.I,
)
_OUTCOMES_WERE = re.compile(
    r"\b(?:outcomes?(?:\s+measures?)?|end[- ]?points?)(?:\s+[\w-]+){0,4}?\s+(?:was|were|included?|consisted of|comprised)\s+(?P<o>[^;]{3,200})",
    re.I,
)
_MEASURED = re.compile(
    r"^(?P<o>(?:the\s+)?[A-Za-z][^;]{2,120}?)\s+(?:was|were)\s+(?:\w+ly\s+)?(?:measured|assessed|recorded|documented|"
    r"determined|evaluated|monitored|analy[sz]ed|compared|graded|obtained|quantified)\b",
    re.I,
)
_AIM_ON = re.compile(
    r"\b(?:effects?|impact|influence|efficacy) of\s+[^;]{3,100}?\s+on\s+(?P<o>[^;,]{3,120}?)"
    r"(?=\s+(?:in|among|of patients|during|after)\b|[;,(:]|\.\s|\.$|$)",
    re.I,
)
_RATE = re.compile(
    r"\b(?:healing|eradication|cure|relapse|recurrence|remission|response|relief|resolution|mortality|survival|"
    r"rebleeding|symptom[- ]free|success)\s+rates?\b",
    re.I,
)
_O_END = re.compile(
    r"\s+(?:at|after|by|in|with|using|assessed|measured|determined|as (?:assessed|judged|defined)|defined|according)\b.*$",
    re.I,
)
_GENERIC_OUTCOME = re.compile(
    rf"^(?:(?:the|all|medical|clinical|baseline|demographic|laboratory)\s+)*(?:data|results?|samples?|specimens?|"
    rf"biopsies|information|variables|parameters)\b|^(?:the\s+)?{POP_NOUN}(?:\s+\w+)?$",
    re.I,
)
_AIM_MEASURE = re.compile(
    r"\b(?:to|we) (?:determine|assess|estimate|evaluate|investigate|examine|measure|describe|compare|quantify)d?\s+(?:the\s+)?"
    r"(?P<o>(?:prevalence|incidence|frequency|risk|rates?|occurrence|time to|duration) of\s+[^;,]{3,100}?)"
    r"(?=\s+(?:in|among|during|after|and to|and the|with|by)\b|[;,(:]|\.\s|\.$|$)",
    re.I,
)


def _clean_outcome(text: str, *, cut_context: bool = True) -> str:
    text = re.sub(r"\s*\([^()]*\)", "", text).strip(" ,")
    if cut_context:
        text = _O_END.sub("", text) or text
    return _clip_words(re.sub(r"^(?:the|a|an)\s+", "", text, flags=re.I), 24)


def find_outcome(doc: Doc) -> Found | None:
    """O: an OUTCOMES section; "primary end point was …"; "outcomes were …"; "X was assessed"; "effect of … on Y"; a rate."""
    found = _from_section(doc, "O", "outcomes")
    if found:
        return found
    for cue, rx, cut, pool in (
        ("primary outcome", _PRIMARY, False, doc.sentences),
        ("primary outcome", _PRIMARY_AFTER, False, [s for s in doc.sentences if _PRIMARY_AFTER_CUE.search(s.text)]),
        ("primary outcome", _PRIMARY_PAREN, False, doc.sentences),
        ("outcomes were", _OUTCOMES_WERE, False, doc.methods),
        ("measured", _MEASURED, True, doc.methods),
        ("aim effect on", _AIM_ON, False, doc.methods),
        ("aim measure", _AIM_MEASURE, False, doc.methods),
    ):
        for s in pool:
            m = rx.search(s.text)
            if m:
                value = _clean_outcome(m.group("o"), cut_context=cut)
                if len(value) > 2 and not _GENERIC_OUTCOME.match(value):
                    return Found(value, f"{cue}: '{_snippet(s.text)}'")
    m = _AIM_ON.search(doc.title)
    if m:
        return Found(_clean_outcome(m.group("o")), f"title effect on: '{_snippet(m.group(0), 60)}'")
    m = _RATE.search(doc.body)
    if m:
        rate = doc.body[_left_modifiers(doc.body, m.start(), limit=3) : m.end()]
        return Found(_clean_outcome(rate), f"rate: '{_snippet(rate, 60)}'")
    return None
