"""Intervention and comparator rules: every arm the abstract names, the control arm."""

from __future__ import annotations

import re

from ra_agent.evidence.pico.population import _from_section
from ra_agent.evidence.pico.text import NUMBER, POP_NOUN, Doc, Found, _clip_words, _snippet, _split_top, sentences

# --------------------------------------------------------------------------- intervention and comparator

_CONTROL_ARM = re.compile(
    r"^(?:(?:an? |the |identical |matching |matched |inactive |dummy )*(?:placebos?|sham\b|vehicle\b)|usual care|"
    r"standard care|no (?:treatment|therapy|intervention|supplementation)|not at all|controls?\b|waiting list|wait-list)",
    re.I,
)
_ARMS_LEAD = re.compile(
    r"\b(?:randomi[sz]ed|randomly (?:assigned|allocated|divided)|assigned|allocated)\s+(?:\w+\s+){0,3}?(?:to|into|between)\s+"
    r"(?:receive\s+|treatment with\s+|therapy with\s+)?(?:either\s+)?|"
    r"\b(?:received|were given|were treated with|treated (?:for [^,]{1,30}? )?with|given|receiving)\s+(?:either\s+)?",
    re.I,
)
_ARM_GROUPS = re.compile(
    r"^(?:(?:one|either|each|any|1) of (?:the )?(?:\w+|\d+) )?(?:\w+[ -]){0,2}?(?:groups?|regimens?|arms?|treatments?|"
    r"interventions?|strategies|conditions)\b[^:;.]{0,30}?[:,]\s*",
    re.I,
)
_ARM_SEP = re.compile(
    r"\s*;\s*(?:or\s+|and\s+)?|,?\s+(?:or|versus|vs\.?|compared (?:with|to))\s+(?:to\s+|with\s+)?|(?<=[\])]),\s+(?:and\s+|or\s+)?|"
    rf",?\s+and\s+(?:{NUMBER})\s+(?:[\w-]+\s+)?{POP_NOUN}\s+(?:to\s+|received\s+|were given\s+)?",
    re.I,
)
_PAIR_SEP = re.compile(r"\s+(?:and|with|to|or|versus|vs\.?)\s+", re.I)  # "comparison of A and B"
_ARM_END = re.compile(
    r"\s+(?:for (?:\d+|one|two|three|four|six|eight|twelve|a|the)\b|during|at (?:the|baseline)|after|"
    r"in (?:a|the|this|these|each|patients|the treatment)|while|until|with (?:a|the) (?:primary|aim)|and (?:were|was|then|followed|patients)|"
    r"who|which|were|was|is|are|to (?:compare|assess|evaluate)|prior to|before|as|over|on days?|followed by|given|"
    r"administered|taken|via|using|starting|beginning)\b|"
    r"\s*\((?:n|N)\s*=[^)]*\)|\s*\([^)]*\b(?:groups?|arms?|patients)\b[^)]*\)|[;:]",
    re.I,
)
_ARM_LEAD_WORDS = re.compile(
    r"^(?:(?:either|to|with|the|a|an|receive|treatment with|therapy with|therapy|treatment)\s+|"
    r"(?:\d+|one|two|three|four|six|eight|twelve)\s+(?:days?|weeks?|months?)\s+of\s+(?:[\w-]+\s+)?(?:treatment|therapy)\s+with\s+|"
    r"(?:(?:a|one|two|three|\d+)\s+)?(?:single\s+|increasing\s+|repeated\s+|standard\s+|daily\s+|high\s+|low\s+)*"
    r"(?:doses?|courses?|sessions?|cycles?|injections?|infusions?)\s+of\s+|"
    r"(?:\d+|one|two|three|four|six|eight|twelve)[\s-]+(?:days?|weeks?|months?|years?)\s+of\s+|"
    r"(?:administering|adding|using|giving|the use of|the addition of|addition of|use of)\s+|"
    r"(?:group|arm|test|control)\s+\w{1,3},?\s+(?:received|was given|was treated with|treated with|given)\s+)+",
    re.I,
)
_DOSE_ONLY = re.compile(
    r"^(?:(?:\d+(?:\.\d+)?|mg|g|µg|μg|mcg|ml|iu|kg|daily|once|twice|thrice|times|a|per|day|days|week|weeks|each|every|"
    r"o\.?d\.?|b\.?i\.?d\.?|b\.?d\.?|t\.?i\.?d\.?|q\.?d\.?|t\.?d\.?s\.?|o\.?m\.?|nocte|mane|bid|tid|qd|qid|dose|doses|"
    r"respectively|and|or|,|/|\(|\)|-)[\s,/()-]*)+$",
    re.I,
)
_PROTECT = re.compile(r"\b(along|together|combined|in combination|in addition|plus) (with|to)\b", re.I)
_KEEP = "\x1f"  # joins protected phrases ("along with") so no separator splits them
_TITLE_VERSUS = re.compile(
    r"(?:^|:\s*|\b(?:of|with)\s+)(?P<span>[^:;]{3,90}?\s+(?:versus|vs\.?|compared (?:with|to))\s+[^:;?]{3,90}?)"
    r"(?=\s+(?:in|for|on|as|during|after|among)\b|[:;?,]|\.\s|\.$|-{2}|$)",
    re.I,
)
_TITLE_COMPARISON = re.compile(
    r"\bcomparison of\s+(?:(?:the )?(?:\w+ )?(?:doses|regimens|formulations) of\s+)?(?P<span>[^:;]{3,80}?\s+(?:and|with|to)\s+"
    r"[^:;?]{3,80}?)(?=\s+(?:in|for|on|as|during|after|among)\b|[:;?]|\.\s|\.$|$)",
    re.I,
)
_TREATMENT = re.compile(
    r"\b(?:effects?|efficacy|safety|impact|role|use|benefit|value) of\s+(?P<i>[^;:?]{3,80}?)"
    r"(?=\s+(?:on|in|for|as|among|versus|vs\.?|compared|during|after|with regard|prior|before|by)\b|[;:?,(]|\.\s|\.$|$)"
    r"|\b(?:treatment|therapy|monotherapy|prophylaxis) with\s+(?P<i2>[^;:?]{3,80}?)"
    r"(?=\s+(?:on|in|for|as|among|versus|vs\.?|during|after|prior|before|by)\b|[;:?,(]|\.\s|\.$|$)",
    re.I,
)
_GENERIC_ARM = re.compile(
    rf"^(?:efficacy|safety|tolerability|effects?|the|and|treatment|therapy|{POP_NOUN})\b|^(?:group|arm)\s*\w{{0,3}}$|"
    rf"^(?:(?:one|two|three|four|both|all|either|each|\d+)\s+)?(?:[\w-]+\s+)?(?:groups?|arms?|interventions?|treatments?|"
    rf"conditions|regimens|drugs?|study drugs?|medications?)$|\b{POP_NOUN}$|^\(?[a-h1-9]\)|"
    rf"^(?:first|second|third|fourth|former|latter|other|others|neither|both|none|also|only|alone)$|"
    rf"^(?:{NUMBER})\s+(?:days?|weeks?|months?|years?|hours?|h|min|minutes)\b",
    re.I,
)

_NOT_ARM = re.compile(
    r"\b(?:had|showed|was|were|is|are|did|than|significant(?:ly)?|difference|p\s*[<=>]|included|scores?|examination|"
    r"criteria|screening|visits?)\b",
    re.I,
)

MAX_ARM_WORDS = 12


def _arm_ok(arm: str) -> bool:
    """A named treatment: short once parentheses are dropped, with no result or eligibility wording."""
    bare = re.sub(r"\([^()]*\)?", "", arm)
    return len(bare.split()) <= MAX_ARM_WORDS and not _NOT_ARM.search(bare)


def _named_again(arm: str, doc: Doc) -> bool:
    """A lone treatment phrase counts when its key word recurs in the title or abstract (treatments are named again)."""
    key = _key_word(arm)
    return bool(key) and doc.mentions(key) >= 2


_KEY_STOP = frozenset(
    "placebo plus daily twice once twice-daily once-daily group therapy treatment used needed with dose doses weeks days "
    "either high-dose "
    "low-dose standard-dose standard high low combination intermittent".split()
)
_BETTER = re.compile(
    r"\b(?:superior to|more effective(?:ly)? than|better than|more (?:\w+ ){0,2}than|than|compared (?:with|to)|versus|vs\.?|"
    r"over)\b",
    re.I,
)


def _protect(text: str) -> str:
    return _PROTECT.sub(lambda m: f"{m.group(1)}{_KEEP}{m.group(2)}", text)


_DOSE_PAREN = re.compile(r"\s*\((?:[^()]*\([^()]*\))*[^()]*\d[^()]*\)|\s*\([^()]*\d[^()]*$")
_PURE_DOSE = re.compile(
    r"\s*\(\s*(?:[\d.]+(?:\s*(?:,|and|or|to|-|–)\s*)?)+\s*(?:mg|g|µg|μg|mcg|micrograms?|ml|iu|units?|mmol)"
    r"(?:\s*/\s*(?:kg|day|d|m2|dl))?\s*\)",
    re.I,
)


def _clean_arm(arm: str) -> str:
    """An arm without allocation wording, dosing details in parentheses ("(15 µg/kg, n = 30)") or trailing schedule."""
    arm = _DOSE_PAREN.sub(lambda m: m.group(0) if _PURE_DOSE.fullmatch(m.group(0)) else "", arm)
    stop = _ARM_END.search(arm)
    arm = arm[: stop.start()] if stop else arm
    arm = _ARM_LEAD_WORDS.sub("", arm.strip(" ,;"))
    arm = re.sub(r"\s+(?:and|or|with|in|of|used|given|administered)$", "", arm.replace(_KEEP, " "), flags=re.I)
    return _clip_words(arm, 18)


_LATER_PHASE = re.compile(r"\s+(?:then |and then )?followed by\b.*?(?=;|,\s*(?:or|and)\s|$)", re.I | re.S)


def _split_arms(text: str, separator: re.Pattern[str] = _ARM_SEP) -> list[str]:
    """Treatment arms of "A 20 mg or 40 mg, B or placebo" (dose-only pieces rejoin the arm before them). What an arm
    is "followed by" is a later phase of that arm, not another arm ("B for 4 wk followed by either B 30 mg or B 60
    mg" is one arm)."""
    text = _LATER_PHASE.sub("", text)
    arms: list[str] = []
    either = re.search(r"[,;]?\s+(?:and |plus |with )?either\s+", text)
    if either and either.start() > 0:  # "C and A plus either X, Y or Z": the arms are X, Y and Z
        text = text[either.end() :]
    for piece in _split_top(_protect(text), separator):
        arm = _clean_arm(piece)
        if not arm:
            continue
        if arms and _DOSE_ONLY.match(arm):
            arms[-1] = f"{arms[-1]} or {arm}"
        elif len(arm) > 2 and re.search(r"[A-Za-z]{3}", arm) and not _GENERIC_ARM.search(arm) and arm not in arms:
            arms.append(arm)
    return arms


def _key_word(arm: str) -> str:
    """The arm's first distinctive word (its drug or device), for matching against title and conclusions."""
    return next((w for w in re.findall(r"[a-z][\w-]{3,}", arm.lower()) if w not in _KEY_STOP), "")


def comparison_votes(active: list[str], doc: Doc) -> dict[str, int]:
    """Per arm, the sentences saying "A … superior to/than/compared with/versus B" with A this arm and B another."""
    keys = {a: _key_word(a) for a in active}
    votes = dict.fromkeys(active, 0)
    for s in doc.sentences:
        text = s.text.lower()
        for m in _BETTER.finditer(text):
            before = set(re.findall(r"[a-z][\w-]*", text[max(0, m.start() - 120) : m.start()]))
            after = set(re.findall(r"[a-z][\w-]*", text[m.end() : m.end() + 60]))
            for a in active:
                rivals = {keys[b] for b in active if keys[b] and keys[b] != keys[a]}
                if keys[a] in before and not rivals & before and rivals & after:
                    votes[a] += 1
    return votes


def _rank_active(active: list[str], doc: Doc) -> list[str]:
    """Arms ordered experimental-first: sentences saying "A … superior to/than B" vote for A; the title breaks ties."""
    keys = {a: _key_word(a) for a in active}
    votes = comparison_votes(active, doc)
    title_words = re.findall(r"[a-z][\w-]*", doc.title.lower())

    def rank(arm: str) -> tuple[int, int]:
        pos = title_words.index(keys[arm]) if keys[arm] in title_words else len(title_words)
        return (-votes[arm], pos)

    return sorted(active, key=rank)


def _order_arms(arms: list[str], doc: Doc) -> tuple[list[str], list[str]]:
    """(experimental, comparator): control arms (placebo, usual care…) compare; else the top-ranked drug's arms lead."""
    control = [a for a in arms if _CONTROL_ARM.match(a)]
    active = [a for a in arms if not _CONTROL_ARM.match(a)]
    if control or len(active) < 2:
        return active, control
    ranked = _rank_active(active, doc)
    lead = _key_word(ranked[0])
    experimental = [a for a in ranked if _key_word(a) == lead]
    if len(experimental) == len(ranked):
        experimental = ranked[:1]
    return experimental, [a for a in ranked if a not in experimental]


def _arms_found(arms: list[str], doc: Doc, cue: str) -> tuple[Found | None, Found | None]:
    active, control = _order_arms(arms, doc)
    if not active:
        return None, None
    c_found = Found("; ".join(control), cue) if control else _placebo(doc)
    return Found("; ".join(active), cue), c_found


def _valid_arms(arms: list[str], doc: Doc) -> list[str]:
    """The arms that name a treatment; [] unless at least two do (an allocation names every arm it compares)."""
    kept = [a for a in arms if _arm_ok(a)]
    return kept if len(kept) >= 2 else []


def _section_arms(doc: Doc) -> tuple[Found | None, Found | None]:
    """(I, C) from an INTERVENTIONS section: the arms its first sentence allocates, else that sentence."""
    text = doc.labelled.get("I", "")
    first = sentences(text)[0] if sentences(text) else text
    if not first:
        return None, None
    for lead in _ARMS_LEAD.finditer(first):
        arms = _valid_arms(_split_arms(_ARM_GROUPS.sub("", first[lead.end() :])), doc)
        if arms:
            return _arms_found(arms, doc, "section: interventions")
    comparator = _from_section(doc, "C", "comparator") or _placebo(doc)
    return Found(_clip_words(first, 30), "section: interventions"), comparator


def find_arms(doc: Doc) -> tuple[Found | None, Found | None]:
    """(I, C): an INTERVENTIONS section's arms; the allocation sentence's arms; the title's "A versus B" or "comparison
    of A and B"; a treatment phrase named again; the title's head ("X reduces …"). C falls back to a mentioned placebo."""
    i_found, c_found = _section_arms(doc)
    if i_found:
        return i_found, c_found
    methods = [s for s in doc.methods if not s.is_background]
    for s in methods:
        for lead in _ARMS_LEAD.finditer(s.text):
            arms = _valid_arms(_split_arms(_ARM_GROUPS.sub("", s.text[lead.end() :])), doc)
            if arms:
                return _arms_found(arms, doc, f"arms: '{_snippet(s.text)}'")
    spans = [
        ("title versus", _TITLE_VERSUS, doc.title, _ARM_SEP),
        ("title comparison", _TITLE_COMPARISON, doc.title, _PAIR_SEP),
    ]
    for where, rx, text, separator in spans:
        m = rx.search(_protect(text))
        if not m:
            continue
        arms = _valid_arms(_split_arms(_trim_title_lead(m.group("span")), separator), doc)
        if arms:
            i_found, c_found = _arms_found(arms, doc, f"{where}: '{_snippet(m.group(0), 80)}'")
            if i_found and c_found:
                return i_found, c_found
    for text, where in [(doc.title, "title"), *((s.text, "abstract") for s in methods)]:
        m = _TREATMENT.search(text)
        if m:
            value = _clean_arm(m.group("i") or m.group("i2"))
            lone = value and not _CONTROL_ARM.match(value) and not _GENERIC_ARM.search(value)
            if lone and _arm_ok(value) and _named_again(value, doc):
                return Found(value, f"{where} treatment phrase: '{_snippet(m.group(0), 80)}'"), _placebo(doc)
    return _title_head(doc), _placebo(doc)


_TITLE_HEAD = re.compile(
    r"^(?:(?:a |an |the )?(?:(?:pilot|randomi[sz]ed|controlled|double-blind|prospective|clinical|comparative|"
    r"placebo-controlled|open|multicent(?:re|er))[\s,-]+)*(?:study|trial|evaluation|assessment) of\s+)?"
    r"(?P<i>[A-Za-z(][^:;,?]{2,60}?)\s+(?:"
    r"(?:improves?|reduces?|increases?|decreases?|prevents?|enhances?|lowers?|shortens?|accelerates?|delays?|"
    r"does not|did not|fails? to|is (?:not )?(?:effective|superior|safe|associated))\b|"
    rf"(?:in|for|among) (?:the (?:treatment|management|prevention) of\b|(?:[\w-]+ ){{0,3}}{POP_NOUN}\b))",
    re.I,
)

# A title opening with a change or a frequency reports a finding ("Increased prevalence of …"), not a treatment.
_FINDING_HEAD = re.compile(
    r"(?:increased|decreased|reduced|improved|elevated|impaired|altered|high|higher|low|lower|prevalence|incidence|"
    r"risk|changes?|levels?|outcomes?|predictors?|factors?|determinants?)\b",
    re.I,
)


def _title_head(doc: Doc) -> Found | None:
    """I: the title's subject when the title says what it does ("X reduces …") or for whom ("X in patients with …")."""
    m = _TITLE_HEAD.search(doc.title)
    if not m:
        return None
    head = re.sub(
        r"^(?:(?:are|is|does|do|can|should|effectiveness|efficacy|acceptability|feasibility|safety|effects?|impact|role|"
        r"use|value)\s+(?:of\s+)?)+",
        "",
        m.group("i"),
        flags=re.I,
    )
    head = re.split(
        r"\s+(?:of|on|related|vary|varies|is|are|was|were|still|effects?|levels?)\b", head, maxsplit=1, flags=re.I
    )[0]
    value = _clean_arm(head)
    if _FINDING_HEAD.match(value):
        return None
    if value and not _GENERIC_ARM.search(value) and not _CONTROL_ARM.match(value) and _named_again(value, doc):
        return Found(value, f"title head: '{_snippet(m.group(0), 80)}'")
    return None


def _trim_title_lead(span: str) -> str:
    """A comparison span without what precedes its first arm ("Stability and relapse of A versus B" → "A versus B")."""
    cut = re.search(r"^.*\b(?:of|with|using|between|for)\s+(?=[^:;]*\b(?:versus|vs\.?|compared)\b)", span, re.I)
    return (
        span[cut.end() :]
        if cut and re.search(r"\b(?:versus|vs\.?|compared)\b", span[: cut.end()], re.I) is None
        else span
    )


def _placebo(doc: Doc) -> Found | None:
    m = re.search(r"\bplacebo\b", f"{doc.title} {doc.body}", re.I)
    return Found("placebo", "text mentions placebo") if m else None
