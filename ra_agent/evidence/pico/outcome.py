"""Outcome rules: primary outcome cues, outcome lists and measured quantities."""

from __future__ import annotations

import re

from ra_agent.evidence.pico.population import _from_section, _left_modifiers
from ra_agent.evidence.pico.text import POP_NOUN, Doc, Found, _clip_words, _snippet

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
    r"\b(?:outcomes?(?:\s+measures?)?|end[- ]?points?)(?:\s+[\w-]+){0,4}?\s+(?:was|were|included?|consisted of|comprised)\s+"
    r"(?!(?:\w+ed|collected|taken|seen|done|made|shown|known|similar|comparable|not|also|significantly)\b)(?P<o>[^;]{3,200})",
    re.I,
)
_MEASURED = re.compile(
    r"^(?P<o>(?:the\s+)?[A-Za-z][^;]{2,120}?)\s+(?:was|were)\s+(?:\w+ly\s+)?(?:measured|assessed|determined|evaluated|"
    r"monitored|graded|quantified)\b",
    re.I,
)
# What "X was measured" names when X is no outcome: people, material, the design, the treatment.
_MEASURED_NOT = re.compile(
    rf"\b(?:{POP_NOUN}|samples?|specimens?|biopsies|questionnaires?|data|records?|groups?|study|trial|administration|"
    rf"treatments?|therapy|doses?|were|was)\b|^(?:\d|in|during|after|at|on|for|this|these)\b|,\s+and\b",
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
# Words that name a kind of result rather than what was measured ("efficacy and safety of X").
_QUALITY_WORD = (
    r"(?:efficacy|safety|toxicity|tolerability|effectiveness|outcomes?|adherence|compliance|effects?|feasibility|"
    r"acceptability|accuracy|pharmacokinetics?|pk profiles?|potential|impact|benefits?|value|usefulness|utility)"
)
_GENERIC_OUTCOME = re.compile(
    rf"^(?:(?:the|all|medical|clinical|baseline|demographic|laboratory)\s+)*(?:data|results?|samples?|specimens?|"
    rf"biopsies|information|variables|parameters)\b|^(?:the\s+)?{POP_NOUN}(?:\s+\w+)?$|"
    rf"^(?:(?:the|overall|clinical|its|their)\s+)?{_QUALITY_WORD}(?:\s*(?:,|and|or)\s*(?:the\s+)?{_QUALITY_WORD})*"
    rf"(?:\s+of\b.*)?$",
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


_CHANGE_IN = re.compile(
    r"\b(?:differences?|reductions?|decreases?|increases?|improvements?|changes?|declines?|rises?|gains?|losses?|"
    r"elevations?|falls?|drops?)\s+(?:(?:was|were)\s+(?:found|observed|seen|detected|noted)\s+)?(?:from baseline\s+)?"
    r"(?:in|for|with respect to|in terms of|regarding)\s+(?P<o>(?:the\s+)?[a-z][^,;:()]{2,80}?)"
    r"(?=\s+(?:between|among|from|after|at|compared|versus|vs\.?|than|with|during|over|for|by|was|were|is|are|of \d|"
    r"in (?:the|both|either|all|each|patients|subjects|group)|(?:from|to) \d)\b|\s*[,;:(]|\.\s|\.$|$)",
    re.I,
)

_SUBJECT_CHANGED = re.compile(
    r"(?:^|^(?:in|at|after|during) [^,]{1,60},\s+|;\s+|\bwhereas\s+|\bbut\s+)(?P<o>(?:the\s+)?(?:mean\s+|median\s+)?"
    r"[A-Za-z][^,;:()]{2,70}?)\s+(?:(?:was|were)\s+(?:not\s+)?|(?:did not|tended to)\s+)"
    r"(?:(?:\w+ly|also|further|much|not)\s+|\([^()]*\)\s+)*"
    r"(?:higher|lower|greater|less|reduced|improved|increased|decreased|better|worse|similar|comparable|shorter|longer|"
    r"unchanged|different|elevated|prolonged|changed|affected|smaller|larger|faster|slower|"
    r"differ|change|improve|decrease|increase)\b|"
    r"(?:^|^(?:in|at|after|during) [^,]{1,60},\s+)(?P<o2>(?:the\s+)?(?:mean\s+|median\s+)?[A-Za-z][^,;:()]{2,70}?)\s+"
    r"(?:improved|decreased|increased|declined|fell|rose|dropped|diminished|normali[sz]ed)\s+(?:significantly|more|less|"
    r"markedly|in|from|by|after|with|during|over)\b",
    re.I,
)

_HAD_MORE = re.compile(
    r"\b(?:had|showed|reported|experienced|achieved|required|developed|exhibited)\s+(?:a\s+|an\s+)?(?:(?:significantly|"
    r"statistically|markedly|slightly|substantially|much)\s+)*(?:higher|lower|greater|better|worse|fewer|more|shorter|"
    r"longer|less|smaller|larger|reduced|improved|increased|decreased|faster|slower)\s+(?P<o>[a-z][^,;:()]{2,80}?)"
    r"(?=\s+(?:than|in|at|after|compared|versus|vs\.?|during|from|with|over|for)\b|\s*[,;:(]|\.\s|\.$|$)",
    re.I,
)

_NOT_OUTCOME_SUBJECT = re.compile(
    rf"^(?:(?:the|all|both|these|this|there|it|they|no|each|two|three|groups?|the (?:two |three )?groups?)\b|"
    rf"(?:[\w-]+\s+){{0,3}}(?:{POP_NOUN}|groups?|arms?|treatments?|therapy|drugs?)$|if\b)|\b(?:group|arm|compared)\b|\d",
    re.I,
)

# Result sentences about who entered the trial, not what it changed.
_BASELINE = re.compile(r"\b(?:baseline|at entry|at inclusion|initial values?|demographic|characteristics)\b", re.I)
_AIM_SENTENCE = re.compile(
    r"\b(?:to|we) (?:assess|evaluate|investigate|determine|examine|study|compare|test|explore|measure)|\b(?:this|the "
    r"present|our) (?:study|trial)\b|\b(?:aim|objective|purpose|goal)\b|\bwe (?:investigated|studied|evaluated|assessed|examined)",
    re.I,
)

_AIM_LABEL = re.compile(r"OBJECTIVE|AIM|PURPOSE|BACKGROUND|INTRODUCTION|CONTEXT|GOAL")


def _outcome_ok(value: str) -> bool:
    return len(value) > 2 and not _GENERIC_OUTCOME.match(value) and not _NOT_OUTCOME_SUBJECT.search(value)


def find_outcome(doc: Doc) -> Found | None:
    """O: an OUTCOMES section; "primary end point was …"; "outcomes were …"; "X was measured"; a result's
    "difference in Y", "Y was lower" or "had a greater Y"; an aim's "to determine the incidence of Y"; the title's
    "effect of … on Y"; a rate."""
    found = _from_section(doc, "O", "outcomes")
    if found:
        return found
    aims = [s for s in doc.methods if _AIM_LABEL.search(s.label) or _AIM_SENTENCE.search(s.text)]
    half = len(doc.sentences) // 2
    results = [
        s
        for i, s in enumerate(doc.sentences)
        if not s.is_background and (s.is_result or not s.label and i >= half) and not _BASELINE.search(s.text)
    ]
    for cue, rx, cut, pool in (
        ("primary outcome", _PRIMARY, False, doc.sentences),
        ("primary outcome", _PRIMARY_AFTER, False, [s for s in doc.sentences if _PRIMARY_AFTER_CUE.search(s.text)]),
        ("primary outcome", _PRIMARY_PAREN, False, doc.sentences),
        ("outcomes were", _OUTCOMES_WERE, False, doc.methods),
        ("measured", _MEASURED, True, doc.methods),
        ("result change in", _CHANGE_IN, True, results),
        ("result subject", _SUBJECT_CHANGED, True, results),
        ("result comparative", _HAD_MORE, True, results),
        ("aim measure", _AIM_MEASURE, False, aims),
    ):
        for s in pool:
            for m in rx.finditer(s.text):
                raw = m.group("o") or m.groupdict().get("o2") or ""
                if cue == "measured" and _MEASURED_NOT.search(raw):
                    continue
                value = _clean_outcome(raw, cut_context=cut)
                if (
                    _outcome_ok(value)
                    if cue.startswith("result")
                    else len(value) > 2 and not _GENERIC_OUTCOME.match(value)
                ):
                    return Found(value, f"{cue}: '{_snippet(s.text)}'")
    m = _AIM_ON.search(doc.title)
    if m:
        return Found(_clean_outcome(m.group("o")), f"title effect on: '{_snippet(m.group(0), 60)}'")
    m = _RATE.search(doc.body)
    if m:
        rate = doc.body[_left_modifiers(doc.body, m.start(), limit=3) : m.end()]
        return Found(_clean_outcome(rate), f"rate: '{_snippet(rate, 60)}'")
    return None
