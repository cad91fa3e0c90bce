"""Population rules: labelled sections, population phrases, sample size and age."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ra_agent.evidence.pico.text import (
    _WORD,
    NUMBER,
    NUMBER_WORDS,
    POP_NOUN,
    POP_WORDS,
    Doc,
    Found,
    _balanced_tail,
    _clip_words,
    _snippet,
    parse_number,
    sentences,
)

# --------------------------------------------------------------------------- section labels → fields


def _from_section(doc: Doc, field_name: str, cue: str, words: int = 30) -> Found | None:
    text = doc.labelled.get(field_name, "")
    if not text:
        return None
    first = sentences(text)[0] if sentences(text) else text
    return Found(_clip_words(first, words), f"section: {cue}")


# --------------------------------------------------------------------------- what a population is

# A population says who was studied: a condition and who has it. A setting (sites that took part), a bare count
# ("= 60", "113 patients"), an arm's dose note ("(o.d.), n = 112]") or an eligibility exclusion is not one.
_SITE_WORDS = frozenset(
    "centre centres center centers hospital hospitals clinic clinics practice practices site sites institution "
    "institutions university universities department departments ward wards unit units country countries".split()
)
_BARE_PEOPLE = frozenset(
    "patient patients subject subjects participant participants individual individuals person persons people cases "
    "total all each both consecutive eligible evaluable randomised randomized enrolled group groups arm arms".split()
)
_NOT_WHO_WORDS = frozenset(
    "the and with for from who were was had have has than this that these those in of to on by at as or an study "
    "trial design multicentre "
    "multicenter multi-centre double-blind single-blind triple-blind open-label placebo-controlled prospective "
    "randomly crossover parallel-group".split()
)
# an exclusion, or a clause giving a cause ("due to failure with an H2RA"), opens no population
_EXCLUSION_LEAD = re.compile(
    r"^\W*(?:to\s+)?(?:exclu\w*|except\w*|ruling out|rule out|not\b|due to\b|because\b|owing to\b)", re.I
)
_NOT_WHO_TAIL = re.compile(  # who finished or left, what was done to them, what they reported: the phrase ends there
    r"(?<!\bwho)(?<!\bthat)(?<!\bwhich)\s+(?:completed|withdrew|discontinued|finished|dropped out|"
    r"were (?:withdrawn|lost|excluded)|(?:was|were) (?:evaluable|analy[sz]ed)|underwent|received|were given|reported|"
    r"experienced|showed|achieved|responded|improved|developed|remained|became|tended|benefit(?:ed|s)?)\b.*$",
    re.I,
)
# "Investigators from nine medical centers enrolled 159 patients with ..." → "159 patients ..."
_SITE_LEAD = re.compile(
    r"^.*?\b(?:cent(?:re|er)s?|hospitals?|clinics?|practices?|sites?|investigators?)\b[^.;]*?\b"
    r"(?:enrolled|recruited|included|randomi[sz]ed|studied|treated)\s+(?:a total of\s+)?",
    re.I,
)


def population_phrase(text: str) -> str:
    """`text` as a population (a lead naming the sites that enrolled, and what follows a verb of attrition, procedure
    or result, cut), or "" when it does not say who was studied: it opens with an exclusion or a cause, names a
    setting and no people, or has no word beyond counts, symbols, design words and a bare "patients"."""
    phrase = _NOT_WHO_TAIL.sub("", text.strip())
    lead = _SITE_LEAD.match(phrase)
    if lead and not POP_WORDS & set(_WORD.findall(lead.group(0).lower())):
        phrase = phrase[lead.end() :]
    phrase = phrase.strip(" ,;:.")
    if not phrase or _EXCLUSION_LEAD.search(phrase):
        return ""
    words = [w.lower() for w in re.findall(r"[A-Za-z][A-Za-z'-]*[A-Za-z]", phrase)]
    said = [w for w in words if w not in _BARE_PEOPLE and w not in NUMBER_WORDS and w not in _NOT_WHO_WORDS]
    if not said:
        return ""
    if not POP_WORDS & set(words) and _SITE_WORDS & set(said[:4]):  # it opens by naming a setting
        return ""
    return phrase


_COUNTED_PEOPLE = re.compile(rf"{NUMBER}\s+(?:[\w-]+\s+){{0,3}}?{POP_NOUN}\b.*", re.I)


def people_phrase(text: str) -> str:
    """What a phrase that counts people without naming their condition says of them, from its count ("multicentre,
    randomized, double-blind study 217 patients" → "217 patients"); "" when it counts no people."""
    m = _COUNTED_PEOPLE.search(_NOT_WHO_TAIL.sub("", text))
    return m.group(0).strip(" ,;:.") if m else ""


# --------------------------------------------------------------------------- population

_POP_LINK = (
    r"(?:with|having|undergoing|receiving|suffering from|who (?:had|have|were|are|underwent|required)|whose|aged|"
    r"at (?:high|increased|low) risk|on (?:long-term|chronic|maintenance)|in whom|without|requiring|treated for|"
    r"admitted|starting|attending|presenting|of|from)"
)
_POP_CORE = re.compile(
    rf"\b{POP_NOUN}\b(?:\s*\([^)]*\))?(?:\s+(?:\d+|aged)[\w\s.-]{{0,30}}?\b(?:age|old|older|younger|years))?\s+{_POP_LINK}\b",
    re.I,
)
_POP_COUNT = re.compile(rf"(?<![=<>])\s?({NUMBER})\s+((?:[\w/-]+\s+){{0,4}}?){POP_NOUN}\b", re.I)
_POP_IS = re.compile(
    r"\b(?:participants|patients|subjects|the (?:study )?population|eligible (?:patients|participants)) "
    rf"(?:were|included|comprised|consisted of)\s+(?P<p>(?!\w+(?:ed|ing)\b)(?:[\w,-]+\s+){{0,3}}?(?:{POP_NOUN}|aged)\b[^;]{{0,200}})",
    re.I,
)
_LEFT_STOP = frozenset(
    "in of to the and or we were was that for among on from at all by with studied enrolled included recruited "
    "randomized randomised total a an these those this our study trial who which than as into between when "
    "involving including enrolling recruiting identified following after before during versus vs compared comparing "
    "undergoing receiving using treated".split()
)
_POP_STOP = re.compile(
    r"[;:,]|\s\((?!n\b)|\s(?:who|which|that|whose)\b|"
    r"\s(?:were|was|are|is|received|receiving|participated|entered|completed|took part|attended|enrolled|"
    r"underwent|randomi[sz]ed|randomly|assigned|allocated|to receive|treated with|given|by|during|using|"
    r"compared|versus|vs\.?|than|showed|had (?:a|an|the|no|significant)|may|can|could|should|did|does|"
    r"to (?:compare|assess|evaluate|determine|investigate|examine|study)|in (?:a|this|the) (?:\w+[ -])*?(?:study|trial)|"
    r"in the period|(?:from|between|in|during) (?:19|20)\d\d|had|has|have|showed|led|developed|experienced|remained|"
    r"became|improved|responded|tended|benefit(?:ed|s)?)\b",
    re.I,
)
_ENROL = re.compile(
    r"\b(?:randomi[sz]ed|randomly|enrolled|included|recruited|studied|entered|participated|"
    r"assigned|allocated|investigated|were treated|eligible|consisted of|comprised|identified|selected|screened|"
    r"involving|involved)\b",
    re.I,
)
_TITLE_POP = re.compile(
    rf"\b(?:in|among|for)\s+((?:[\w/-]+\s+){{0,4}}?{POP_NOUN}\b.*?)"
    r"(?=[:;?]|\.\s|\.$|\s+(?:a|an|the)\s+(?:[\w-]+\s+)*?(?:study|trial)\b|$)",
    re.I,
)
_TITLE_CONDITION = re.compile(
    r"\b(?:in|for) (?:the )?(?:treatment|management|prevention|therapy|healing|maintenance(?: treatment)?) of\s+"
    r"(?:patients with\s+)?(.+?)(?=[:;?]|\.\s|\.$|\s(?:a|an) (?:[\w-]+[ -])*?(?:study|trial)\b|$)",
    re.I,
)
_LEADING_COUNT = re.compile(rf"^(?:a total of\s+|of\s+|the\s+|all\s+)?(?:{NUMBER})\s+(?:consecutive\s+)?", re.I)


def _left_modifiers(text: str, start: int, limit: int = 4) -> int:
    """Start of the (up to `limit`) modifier words just before `start` ("33 consecutive asthmatic")."""
    pos = start
    for m in reversed(list(re.finditer(r"[\w/+-]+\)?", text[:start]))[-limit:]):
        between = text[m.end() : pos]
        if between.strip(" ()") or m.group(0).lower() in _LEFT_STOP:
            break
        pos = m.start()
    return start - len(_balanced_tail(text[pos:start]))


def _population_phrases(sentence: str) -> Iterator[str]:
    """Each "<modifiers> <people> with/undergoing/aged … <condition>" phrase of a sentence."""
    if not POP_WORDS & set(_WORD.findall(sentence.lower())):
        return
    for m in _POP_CORE.finditer(sentence):
        start = _left_modifiers(sentence, m.start())
        stop = _POP_STOP.search(sentence, m.end())
        phrase = sentence[start : stop.start() if stop else len(sentence)]
        phrase = _LEADING_COUNT.sub("", _clip_words(phrase.strip(" ,"), 20)).strip()
        if len(phrase.split()) >= 3:
            yield phrase


_PARTICIPANTS_LINE = re.compile(
    rf"^(?:a total of\s+)?{NUMBER}\s+(?P<p>(?:[\w/-]+\s+){{0,5}}?{POP_NOUN}\b.*?)\.?$", re.I
)
_CASES_CONTROLS = re.compile(
    rf"{NUMBER}\s+(?P<p>(?:[\w-]+\s+){{0,3}}?cases\s+and\s+){NUMBER}\s+(?P<c>[^;.]{{3,120}})", re.I
)


def _until_clause_end(phrase: str) -> str:
    stop = _POP_STOP.search(phrase, len(phrase.split()[0]) if phrase.split() else 0)
    return phrase[: stop.start()] if stop else phrase


def _population_candidates(doc: Doc) -> Iterator[tuple[str, str]]:
    """(phrase, cue) population candidates, most reliable first."""
    for s in doc.methods:
        m = _PARTICIPANTS_LINE.match(s.text)
        if m and len(s.text.split()) <= 16 and not re.search(r"\b(?:were|was)\b", s.text):
            yield m.group("p"), f"participants line: '{_snippet(s.text)}'"
        m = _POP_IS.search(s.text)
        if m:
            yield _until_clause_end(m.group("p")), f"participants were: '{_snippet(s.text)}'"
    enrol = [s for s in doc.methods if _ENROL.search(s.text)]
    for s in enrol:
        for phrase in _population_phrases(s.text):
            yield phrase, f"enrolment sentence: '{_snippet(s.text)}'"
    for s in doc.methods:
        m = _CASES_CONTROLS.search(s.text)
        if m:
            yield m.group("p") + _until_clause_end(m.group("c")), f"cases and controls: '{_snippet(s.text)}'"
    title = _TITLE_POP.search(doc.title)
    if title:
        yield title.group(1), "title: population phrase"
    for phrase in _population_phrases(doc.title):
        yield phrase, "title: population phrase"
    for s in enrol:
        m = _POP_COUNT.search(s.text)
        if (
            m
            and m.group(2).strip()
            and not ({w.lower() for w in m.group(2).split()} & _LEFT_STOP or re.search(r"\d", m.group(2)))
        ):
            yield _LEADING_COUNT.sub("", m.group(0).strip()), f"enrolment count: '{_snippet(s.text)}'"
    condition = _TITLE_CONDITION.search(doc.title)
    if condition:
        yield f"patients with {condition.group(1)}", "title: treatment-of phrase"
    for s in sorted(doc.methods, key=lambda s: s.is_background):
        for phrase in _population_phrases(s.text):
            yield phrase, f"sentence: '{_snippet(s.text)}'"


def find_population(doc: Doc) -> Found | None:
    """P: a PARTICIPANTS section or line; "participants were …"; an enrolment sentence's "N patients with …"; the title."""
    found = _from_section(doc, "P", "participants")
    if found and population_phrase(found.value):
        return Found(population_phrase(found.value), found.cue)
    for phrase, cue in _population_candidates(doc):
        phrase = population_phrase(_clip_words(phrase.strip(" ,"), 20))
        if len(phrase.split()) >= 2:
            return Found(phrase, cue)
    return None


# --------------------------------------------------------------------------- sample size

_GAP = r"(?:(?!\b(?:were|was)\b)[^;\d]){0,60}?"  # words between the counted people and their verb
_NO_EQ = r"(?<![-=<>≤≥±/.,])(?<![=<>]\s)"
_SAMPLE_CUES = (
    (
        "a total of",
        re.compile(
            rf"\b(?:a total of|in total,?|overall,?|altogether,?)\s+({NUMBER})\s+(?:[\w()-]+\s+){{0,3}}?{POP_NOUN}\b|\btotal,?\s+n\s*=\s*({NUMBER})",
            re.I,
        ),
    ),
    (
        "cases and controls",
        re.compile(
            rf"{_NO_EQ}({NUMBER})\s+(?:[\w-]+\s+){{0,3}}?cases\s+and\s+({NUMBER})\s+(?:[\w-]+\s+){{0,2}}?controls\b",
            re.I,
        ),
    ),
    (
        "N randomised",
        re.compile(
            rf"{_NO_EQ}({NUMBER})\s+(?:[\w-]+\s+){{0,4}}?{POP_NOUN}\b{_GAP}\b(?:were|was|had been|underwent)\s+(?:\w+\s+)?(?:randomi[sz]ed|randomly|randomi[sz]ation)\b",
            re.I,
        ),
    ),
    (
        "randomised N",
        re.compile(
            rf"\b(?:randomi[sz]ed|randomly (?:assigned|allocated))\s+({NUMBER})\s+(?:[\w-]+\s+){{0,3}}?{POP_NOUN}\b|{_NO_EQ}({NUMBER})\s+(?:randomi[sz]ed|eligible)\s+{POP_NOUN}\b",
            re.I,
        ),
    ),
    (
        "n = N enrolled",
        re.compile(
            rf"\(\s*n\s*=\s*({NUMBER})\s*\)\s+(?:were|was)\s+(?:\w+\s+)?(?:randomi[sz]ed|enrolled|included|recruited|assessed|studied)\b",
            re.I,
        ),
    ),
    (
        "enrolled N",
        re.compile(
            rf"\b(?:enrolled|recruited|studied|included|investigated|examined)\s+({NUMBER})\s+(?:[\w-]+\s+){{0,3}}?{POP_NOUN}\b",
            re.I,
        ),
    ),
    (
        "N enrolled",
        re.compile(
            rf"{_NO_EQ}({NUMBER})\s+(?:[\w-]+\s+){{0,4}}?{POP_NOUN}\b{_GAP}\b(?:were|was)\s+(?:\w+\s+)?(?:enrolled|included|recruited|studied|entered|evaluated|investigated|treated|examined)\b",
            re.I,
        ),
    ),
    (
        "(n = N)",
        re.compile(rf"\(\s*n\s*=\s*({NUMBER})\s+(?:[\w-]+\s+){{0,2}}?(?:{POP_NOUN}|dyads|pairs|cases)\b", re.I),
    ),
    (
        "N people",
        re.compile(
            rf"{_NO_EQ}({NUMBER})\s+(?:(?!of\b|studies\b|trials\b|groups\b|samples\b|that\b|which\b|who\b|whom\b|"
            rf"whose\b|than\b)[\w-]+\s+){{0,3}}?{POP_NOUN}\b",
            re.I,
        ),
    ),
)
_COUNTED_UNITS = frozenset({"n", "cases", "dyads", "pairs"})
_NOT_COUNT_BEFORE = re.compile(
    r"(?:\b(?:aged?|mean|median|day|days|week|weeks|month|months|year|years|grade|group|arm|visit|of|than|to|and|"
    r"between|per)\s*$)",
    re.I,
)


def find_sample_size(doc: Doc) -> Found | None:
    """SampleSize: "a total of N patients", "N patients were randomised", "we enrolled N", "(n = N)", "N patients"."""
    counted = [s for s in doc.sentences if s.has_number and (s.has_people or s.words & _COUNTED_UNITS)]
    for cue, rx in _SAMPLE_CUES:
        pool = (
            counted
            if cue != "N people"
            else [*(s for s in counted if not s.is_result), *(s for s in counted if s.is_result)]
        )
        for s in pool:
            for m in rx.finditer(s.text):
                if cue == "N people" and _NOT_COUNT_BEFORE.search(s.text[: m.start(1)]):
                    continue
                if cue == "N people" and parse_number(m.group(1)) == 1:  # "one patient withdrew": a person, no sample
                    continue
                groups = [g for g in m.groups() if g]
                numbers = [n for n in map(parse_number, groups) if n is not None]
                if not numbers or len(numbers) != len(groups):
                    continue
                n = sum(numbers)
                if 0 < n < 10_000_000 and not 1900 <= n <= 2100:
                    return Found(str(n), f"{cue}: '{_snippet(m.group(0), 80)}'")
    return None


# --------------------------------------------------------------------------- age

_AGE_MESH = (
    ("Infant, Newborn", "newborn"),
    ("Infant", "infant"),
    ("Child, Preschool", "preschool child"),
    ("Child", "child"),
    ("Adolescent", "adolescent"),
    ("Young Adult", "young adult"),
    ("Adult", "adult"),
    ("Middle Aged", "middle aged"),
    ("Aged", "aged"),
    ("Aged, 80 and over", "aged 80 and over"),
)
_AGE_GROUP = r"(?:neonates|newborns|infants|toddlers|children|adolescents|adults|elderly|older adults|older people)"
_AGE_TEXT = (
    (
        "age range",
        re.compile(
            rf"(?:\b{_AGE_GROUP}\s+)?\b(?:aged?|ages|age range(?: of)?|age(?:d)? between)\s*:?\s*(?:from\s+)?\d+(?:\.\d+)?\s*(?:-|–|to|and)\s*\d+(?:\.\d+)?\s*(?:years?|yrs?|y|months?)\b(?: of age| old)?",
            re.I,
        ),
    ),
    (
        "years of age",
        re.compile(
            rf"(?:\b{_AGE_GROUP}\s+(?:\(\s*)?)?\b\d+(?:\.\d+)?\s*(?:-|–|to)\s*\d+(?:\.\d+)?\s*(?:years?|months?) (?:of age|old)\b|\b\d+ (?:years?|months?) of age or (?:older|younger)\b",
            re.I,
        ),
    ),
    (
        "age bound",
        re.compile(
            r"\baged?\s*(?:≥|>=|>|≤|<=|<|over|above|under|below|at least|older than|younger than)\s*\d+\s*(?:years?|yrs?|months?)?\b|\baged \d+ (?:years? )?(?:or|and) (?:older|over|above)\b",
            re.I,
        ),
    ),
    (
        "mean age",
        re.compile(
            r"\b(?:mean|median|average)\s+(?:\(\w+\)\s+)?age\b[^.;]{0,20}?\d+(?:\.\d+)?(?:\s*(?:±|\+/-)\s*\d+(?:\.\d+)?)?\s*(?:years?|yrs?|y)\b",
            re.I,
        ),
    ),
)
_AGE_WORD = re.compile(rf"\b{_AGE_GROUP}\b|\b(?:paediatric|pediatric|postmenopausal women)\b", re.I)


def find_age(doc: Doc) -> Found | None:
    """PopulationAge: an age range or mean stated in the text, else MeSH age groups, else an age-group word."""
    text = f"{doc.title}. {doc.body}"
    lowered = text.lower()
    for cue, rx in _AGE_TEXT if ("age" in lowered or "year" in lowered or "month" in lowered) else ():
        m = rx.search(text)
        if m:
            return Found(m.group(0).strip(), f"text {cue}: '{_snippet(m.group(0), 60)}'")
    mesh = [(heading, name) for heading, name in _AGE_MESH if heading in doc.paper.mesh]
    if mesh:
        return Found(", ".join(n for _, n in mesh), f"mesh: {'; '.join(h for h, _ in mesh)}")
    m = _AGE_WORD.search(text)
    return Found(m.group(0).lower(), f"text age group: '{m.group(0)}'") if m else None
