"""Deterministic PICO cues over what PubMed records carry: publication types, MeSH, section labels and sentences."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property

from ra_agent.models import Paper

RULES_NAME = "rules:pico-cues-v1"


@dataclass(frozen=True)
class Found:
    """One extracted field value and the cue that justified it (kept as audit evidence)."""

    value: str
    cue: str


# --------------------------------------------------------------------------- text units

_ABBREV_END = re.compile(r"(?:\b[A-Z]|\bvs|\be\.g|\bi\.e|\bet al|\bapprox|\bno|\bfig|\bdr|\bst)\.$", re.I)
_SENT_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'])")
_INLINE_LABEL = re.compile(r"(?:^|(?<=[.!?:]\s))([A-Z][A-Za-z ,&/-]{2,60}?):\s+")
_LABEL_WORDS = re.compile(
    r"\b(background|objectives?|aims?|purpose|methods?|results?|findings|conclusions?|design|setting|"
    r"participants|patients|subjects|population|interventions?|exposures?|outcomes?|measures?|"
    r"endpoints?|comparators?|context|importance|introduction|interpretation|significance)\b",
    re.I,
)
_BACKGROUND_LABEL = re.compile(r"BACKGROUND|INTRODUCTION|CONTEXT|IMPORTANCE|RATIONALE")
_RESULTS_LABEL = re.compile(r"RESULTS?|FINDINGS|CONCLUSIONS?|INTERPRETATION|SIGNIFICANCE|DISCUSSION|LESSONS|RELEVANCE")
_STATS = re.compile(r"\d\s*%|\b[pP]\s*[<=>≤≥]|\bCI\b|\b(?:odds|hazard|risk|rate) ratio\b|\bN\.?S\.?\b")
_WORD = re.compile(r"[a-z]+")
_DIGIT = re.compile(r"\d")
_STOP_WORDS_AFTER = re.compile(r",\s+(?:i\.e\.|e\.g\.)|\s+(?:i\.e\.|e\.g\.)\s")


def sentences(text: str) -> list[str]:
    """Sentences of an abstract; does not break after initials, "vs." or "e.g."."""
    out: list[str] = []
    for piece in _SENT_BREAK.split(text.strip()):
        if out and _ABBREV_END.search(out[-1]):
            out[-1] = f"{out[-1]} {piece}"
        elif piece:
            out.append(piece)
    return out


@dataclass(frozen=True)
class Section:
    label: str  # upper-cased label, "" when unlabelled
    text: str


def sections_of(paper: Paper) -> list[Section]:
    """Sections under the labels the article prints ("INTERVENTIONS:" inline in the abstract text), else the
    record's section labels (which may be NLM categories such as METHODS), else one unlabelled section."""
    text = paper.abstract or " ".join(s.text for s in paper.sections)
    cuts = [m for m in _INLINE_LABEL.finditer(text) if _is_label(m.group(1))]
    if not cuts and any(s.label for s in paper.sections):
        return [Section(s.label.strip().upper(), s.text.strip()) for s in paper.sections if s.text.strip()]
    if not cuts:
        return [Section("", text.strip())] if text.strip() else []
    lead = text[: cuts[0].start()].strip()
    found = [Section("", lead)] if lead else []
    for m, nxt in zip(cuts, [*cuts[1:], None], strict=True):
        body = text[m.end() : nxt.start() if nxt else len(text)].strip()
        if body:
            found.append(Section(m.group(1).strip().upper(), body))
    return found


def _is_label(label: str) -> bool:
    return label.isupper() or bool(_LABEL_WORDS.search(label)) and len(label.split()) <= 6


class Sentence:
    """One sentence, the label of its section, and what the rules ask of it often (computed once)."""

    __slots__ = ("text", "label", "words", "is_result", "is_background", "has_number")

    def __init__(self, text: str, label: str = ""):
        self.text, self.label = text, label
        self.words = frozenset(_WORD.findall(text.lower()))
        # in a results/conclusions section, or carrying statistics (percentages, p values, CIs)
        self.is_result = bool(_RESULTS_LABEL.search(label) or _STATS.search(text))
        self.is_background = bool(_BACKGROUND_LABEL.search(label))
        self.has_number = bool(_DIGIT.search(text) or self.words & NUMBER_WORDS)

    @property
    def has_people(self) -> bool:
        return bool(self.words & POP_WORDS)


@dataclass
class Doc:
    """One paper split into sections and sentences, shared by every field rule."""

    paper: Paper
    sections: list[Section] = field(init=False)

    def __post_init__(self) -> None:
        self.sections = sections_of(self.paper)

    @property
    def title(self) -> str:
        return self.paper.title

    @cached_property
    def body(self) -> str:
        return " ".join(s.text for s in self.sections)

    @cached_property
    def sentences(self) -> list[Sentence]:
        return [Sentence(t, s.label) for s in self.sections for t in sentences(s.text)]

    @cached_property
    def methods(self) -> list[Sentence]:
        """Sentences outside results/conclusions that carry no statistics."""
        return [s for s in self.sentences if not s.is_result]

    @cached_property
    def labelled(self) -> dict[str, str]:
        return labelled_fields(self.sections)


def _clip_words(text: str, n: int = 30) -> str:
    text = _STOP_WORDS_AFTER.split(text, maxsplit=1)[0]
    words = text.split()
    text = " ".join(words[:n]) if len(words) > n else text.strip()
    return text.rstrip(" ,;:").removesuffix(".") if not re.search(r"\b\w\.\w\.$", text) else text.rstrip(" ,;:")


def _snippet(text: str, n: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _balanced_tail(phrase: str) -> str:
    """`phrase` without a leading fragment that closes a parenthesis it never opened ("pylori) eradication rate")."""
    depth = 0
    for i, ch in enumerate(phrase):
        depth += ch == "("
        if ch == ")":
            if depth == 0:
                return phrase[i + 1 :].strip()
            depth -= 1
    return phrase


def _split_top(text: str, separator: re.Pattern[str]) -> list[str]:
    """`text` split at `separator` matches outside parentheses and brackets."""
    depth, depth_at = 0, []
    for ch in text:
        depth_at.append(depth)
        if ch in "([":
            depth += 1
        elif ch in ")]" and depth:
            depth -= 1
    cuts, start = [], 0
    for m in separator.finditer(text):
        if m.start() >= start and depth_at[m.start()] == 0:
            cuts.append(text[start : m.start()])
            start = m.end()
    cuts.append(text[start:])
    return cuts


# --------------------------------------------------------------------------- numbers

_UNITS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if i > 1}
NUMBER_WORDS = frozenset([*_UNITS, *_TENS, "hundred", "thousand"])
_NUM_WORD = "|".join(sorted(NUMBER_WORDS, key=lambda w: (-len(w), w)))
NUMBER = rf"(?:\b\d{{1,3}}(?:,\d{{3}})+\b|\b\d+\b|\b(?:{_NUM_WORD})(?:(?:[\s-]+|\s+and\s+)(?:{_NUM_WORD}))*\b)"


def parse_number(text: str) -> int | None:
    """An integer from digits ("1,282") or English number words ("One hundred and seven")."""
    text = text.strip().lower().replace(",", "")
    if text.isdigit():
        return int(text)
    total = current = 0
    seen = False
    for word in re.split(r"[\s-]+", text):
        if word == "and":
            continue
        if word in _UNITS:
            current += _UNITS[word]
        elif word in _TENS:
            current += _TENS[word]
        elif word == "hundred":
            current = max(current, 1) * 100
        elif word == "thousand":
            total += max(current, 1) * 1000
            current = 0
        else:
            return None
        seen = True
    return total + current if seen else None


# --------------------------------------------------------------------------- study design

# Publication types, most specific first: (type, design class, strong). A weak class may be refined by text cues.
PUB_TYPE_DESIGN = (
    ("Meta-Analysis", "meta-analysis", True),
    ("Network Meta-Analysis", "meta-analysis", True),
    ("Systematic Review", "systematic review", True),
    ("Randomized Controlled Trial", "RCT", True),
    ("Randomized Controlled Trial, Veterinary", "RCT", True),
    ("Equivalence Trial", "RCT", False),
    ("Pragmatic Clinical Trial", "RCT", False),
    ("Controlled Clinical Trial", "controlled trial", True),
    ("Clinical Trial, Phase IV", "clinical trial", False),
    ("Clinical Trial, Phase III", "clinical trial", False),
    ("Clinical Trial, Phase II", "clinical trial", False),
    ("Clinical Trial, Phase I", "clinical trial", False),
    ("Clinical Trial", "clinical trial", False),
    ("Case Reports", "case report", True),
    ("Practice Guideline", "guideline", True),
    ("Guideline", "guideline", True),
    ("Observational Study", "observational study", False),
    ("Review", "narrative review", True),
    ("Editorial", "editorial", True),
    ("Letter", "letter", True),
    ("Comment", "comment", True),
)
PUB_TYPE_QUALIFIERS = (
    ("Multicenter Study", "multicentre"),
    ("Clinical Trial, Phase I", "phase I"),
    ("Clinical Trial, Phase II", "phase II"),
    ("Clinical Trial, Phase III", "phase III"),
    ("Clinical Trial, Phase IV", "phase IV"),
)

# MeSH design descriptors ("... as Topic" headings describe the subject, not the design, and are ignored).
MESH_DESIGN = (
    ("Case-Control Studies", "case-control"),
    ("Cross-Sectional Studies", "cross-sectional"),
    ("Cohort Studies", "cohort"),
    ("Retrospective Studies", "cohort"),
    ("Prospective Studies", "cohort"),
    ("Longitudinal Studies", "cohort"),
)
MESH_QUALIFIERS = (
    ("Double-Blind Method", "double-blind"),
    ("Single-Blind Method", "single-blind"),
    ("Cross-Over Studies", "crossover"),
    ("Prospective Studies", "prospective"),
    ("Retrospective Studies", "retrospective"),
)

_NOT_RANDOM = r"(?<!non-)(?<!non)(?<!not )(?<!quasi-)"
# Text cues for the design class, most specific first: (class, pattern, where) with where "title" or "any".
DESIGN_CUES: tuple[tuple[str, str, str], ...] = (
    ("meta-analysis", r"\bmeta-?analys[ie]s\b|\bpooled analysis\b", "title"),
    (
        "meta-analysis",
        r"^(?:a |this )?meta-?analysis\b|\bmeta-?analysis of \d+|\bwe (?:performed|conducted|undertook) a meta-?analysis",
        "any",
    ),
    ("systematic review", r"\bsystematic (?:literature )?review\b", "title"),
    ("systematic review", r"\b(?:this|a|we (?:performed|conducted|undertook) a) systematic review\b", "any"),
    ("RCT", _NOT_RANDOM + r"\brandomi[sz]ed\b(?! (?:controlled |clinical )?trials\b)(?! studies\b)", "any"),
    ("RCT", _NOT_RANDOM + r"\brandomly (?:assigned|allocated|divided|distributed)\b|\brandomi[sz]ation\b", "any"),
    (
        "controlled trial",
        r"\b(?:double|single|triple)[- ]blind(?:ed)?\b|\bplacebo[- ]controlled\b|\bcontrolled (?:clinical )?(?:trial|study)\b",
        "any",
    ),
    (
        "economic evaluation",
        r"\bcost[- ](?:effectiveness|utility|benefit|minimi[sz]ation)\b|\bpharmacoeconomic|\bdecision[- ]analy|\bmarkov model",
        "any",
    ),
    ("case-control", r"\bcase[- ]control\b|\bcases and (?:\w+ )?controls\b", "any"),
    ("cross-sectional", r"\bcross[- ]sectional\b|\bprevalence (?:study|survey)\b", "any"),
    (
        "cohort",
        r"\bcohort (?:study|analysis|analytic)\b|\bfollow-up study\b|\b(?:prospective|retrospective) (?:\w+ ){0,2}(?:study|analysis|review|series|cohort)\b|\b(?:a|this|the) (?:prospective |retrospective )?cohort of\b",
        "any",
    ),
    (
        "case report",
        r"\bcase report\b|\bwe (?:report|describe|present) (?:a|an|the) (?:case|patient)\b|\ba \d+-year-old (?:man|woman|boy|girl|male|female|patient)\b",
        "any",
    ),
    (
        "case series",
        r"\bcase series\b|\bwe (?:report|describe|present) (?:\d+|two|three|four|five|six|seven|eight|nine|ten) (?:cases|patients)\b",
        "any",
    ),
    ("diagnostic accuracy study", r"\bdiagnostic accuracy\b|\bsensitivity and specificity\b", "any"),
    ("prognostic study", r"\bprognostic study\b", "any"),
    ("pharmacokinetic study", r"\bpharmacokinetic|\bbioavailability\b|\bbioequivalence\b", "any"),
    (
        "clinical trial",
        r"\bopen[- ]label\b|\bsingle[- ]arm\b|\bnon-?comparative\b|\bphase (?:I{1,3}V?|IV|[1-4])[ab]?\b (?:\w+ )?(?:trial|study)\b",
        "any",
    ),
    ("cohort", r"\bcohort\b", "any"),
    ("narrative review", r"^review article\b|\breview\b\W*$", "title"),
    (
        "narrative review",
        r"\bthis (?:article |paper )?reviews?\b|\b(?:we|this paper|this article) reviews?\b|\bthe present review\b",
        "any",
    ),
    (
        "animal study",
        r"\b(?:in|of) (?:rats|mice|dogs|rabbits|pigs|guinea pigs|animals)\b|\b(?:rats|mice|rabbits|dogs) were\b",
        "any",
    ),
    ("in vitro study", r"\bin vitro\b", "any"),
    (
        "cross-sectional",
        r"\b(?:a|this|our) (?:[\w-]+ ){0,2}survey\b|\bsurvey (?:study|of)\b|\bquestionnaire-based\b",
        "any",
    ),
)
_DESIGN_RES = tuple((cls, re.compile(p, re.I | re.M), where) for cls, p, where in DESIGN_CUES)
# A weak publication-type class is replaced by a text class from its family.
_REFINES = {
    "clinical trial": {"RCT", "controlled trial"},
    "observational study": {"cohort", "case-control", "cross-sectional"},
}
_TRIAL_CLASSES = {"RCT", "controlled trial", "clinical trial"}
_NO_QUALIFIERS = {"meta-analysis", "systematic review", "narrative review", "case report", "guideline"}

QUALIFIER_CUES = (
    ("double-blind", r"\bdouble[- ]blind"),
    ("single-blind", r"\bsingle[- ]blind"),
    ("open-label", r"\bopen[- ]label\b|\bopen (?:study|trial)\b"),
    (
        "placebo-controlled",
        r"\bplacebo[- ]controlled\b|\bor (?:a |matching )?placebo\b|\bversus placebo\b|\bvs\.? placebo\b|\bwith placebo\b|\bplacebo (?:group|arm)\b",
    ),
    ("crossover", r"\bcross-?over\b|\bcrossed over\b"),
    ("cluster", r"\bcluster[- ]randomi[sz]ed|\bclusters? (?:were )?randomi[sz]ed\b|\bcluster randomi"),
    ("stepped-wedge", r"\bstepped[- ]wedge\b"),
    ("multicentre", r"\bmulti-?cent(?:re|er|ric)\b|\bmulti-?site\b"),
    ("single-centre", r"\bsingle[- ]cent(?:re|er)\b|\bin a single cent(?:re|er)\b"),
    ("prospective", r"\bprospective(?:ly)?\b"),
    ("retrospective", r"\bretrospective(?:ly)?\b"),
    ("post hoc analysis", r"\bpost[- ]hoc analys[ie]s\b"),
    ("secondary analysis", r"\bsecondary analys[ie]s\b"),
    ("cost-effectiveness", r"\bcost[- ]effectiveness\b"),
    ("pharmacokinetic", r"\bpharmacokinetic"),
)
_QUALIFIER_RES = tuple((name, re.compile(p, re.I)) for name, p in QUALIFIER_CUES)
_PHASE = re.compile(
    r"\b(?:a|the|this|in) phase (I{1,3}V?|IV|[1-4])([ab])?\b|\bphase (I{1,3}V?|IV|[1-4])([ab])? (?:\w+ )?(?:trial|study)\b",
    re.I,
)


def design_from_pub_types(pub_types: Iterable[str]) -> tuple[str, str, bool] | None:
    """(class, publication type, strong) for the most specific design publication type, if any."""
    types = set(pub_types)
    for pub_type, cls, strong in PUB_TYPE_DESIGN:
        if pub_type in types:
            return cls, pub_type, strong
    return None


def design_from_text(title: str, texts: Iterable[str] = ()) -> tuple[str, str] | None:
    """(class, matched text) for the first design cue, cue by cue, in the title and then in `texts`."""
    texts = list(texts)
    for cls, rx, where in _DESIGN_RES:
        for text in (title,) if where == "title" else (title, *texts):
            m = rx.search(text)
            if m:
                return cls, m.group(0)
    return None


def design_qualifiers(cls: str, text: str, paper: Paper) -> list[str]:
    """Blinding, control, crossover, centres, direction and phase qualifiers that apply to a design class."""
    if cls in _NO_QUALIFIERS:
        return []
    mesh, types = set(paper.mesh), set(paper.pub_types)
    found = [name for heading, name in MESH_QUALIFIERS if heading in mesh]
    found += [name for name, rx in _QUALIFIER_RES if rx.search(text)]
    found += [name for pub_type, name in PUB_TYPE_QUALIFIERS if pub_type in types]
    phase = _PHASE.search(text)
    if phase and cls in _TRIAL_CLASSES:
        numeral, letter = (phase.group(1), phase.group(2)) if phase.group(1) else (phase.group(3), phase.group(4))
        found = [q for q in found if not q.startswith("phase ")] + [f"phase {numeral.upper()}{letter or ''}"]
    unique = list(dict.fromkeys(q for q in found if q.split()[0] not in cls.lower()))
    if "single-centre" in unique and "multicentre" in unique:
        unique.remove("single-centre")
    return unique


def find_design(doc: Doc) -> Found | None:
    """Design class (publication type, else text cues or MeSH, else the DESIGN section) and its qualifiers."""
    paper = doc.paper
    design_text = doc.labelled.get("StudyDesign", "")
    by_type = design_from_pub_types(paper.pub_types)
    by_text = (design_from_text(design_text) if design_text else None) or design_from_text(
        doc.title, ["\n".join(s.text for s in doc.sentences)]
    )
    cls = cue = ""
    if by_type and (by_type[2] or not by_text or by_text[0] not in _REFINES.get(by_type[0], ())):
        cls, cue = by_type[0], f"pub_type: {by_type[1]}"
    if not cls:
        by_mesh = next(((c, h) for h, c in MESH_DESIGN if h in paper.mesh), None)
        if by_text and not (by_mesh and by_text[0] in ("cross-sectional", "cohort") and by_mesh[0] != by_text[0]):
            cls, cue = by_text[0], f"text: '{_snippet(by_text[1], 60)}'"
        elif by_mesh:
            cls, cue = by_mesh[0], f"mesh: {by_mesh[1]}"
    if not cls and design_text:
        return Found(_clip_words(sentences(design_text)[0], 12), "section: DESIGN")
    if not cls:
        return None
    quals = design_qualifiers(cls, f"{doc.title} {doc.body}", paper)
    return Found(f"{cls} ({', '.join(quals)})" if quals else cls, cue)


RCT_DESIGN = re.compile(r"\bRCTs?\b|" + _NOT_RANDOM + r"\brandomi[sz]ed\b|\brandomly\b", re.I)


def is_rct_design(design: str) -> bool:
    """True when a StudyDesign string (rules or LLM) names a randomised trial."""
    return bool(design) and not re.search(r"\bnon-?randomi[sz]ed\b", design, re.I) and bool(RCT_DESIGN.search(design))


def design_class(design: str) -> str:
    """The design class of any StudyDesign string ("" when none is recognised), for comparisons."""
    if is_rct_design(design):
        return "RCT"
    found = design_from_text(design)
    return found[0] if found else design.split("(")[0].strip().lower()


# --------------------------------------------------------------------------- section labels → fields

SECTION_FIELDS = (
    ("O", re.compile(r"\b(?:OUTCOMES?|ENDPOINTS?|END POINTS?)\b")),
    ("I", re.compile(r"\bINTERVENTIONS?\b|\bEXPOSURES?\b")),
    ("C", re.compile(r"\bCOMPARATORS?\b|\bCOMPARISONS?\b|\bCONTROLS?\b")),
    ("P", re.compile(r"\bPARTICIPANTS\b|\bPATIENTS?\b|\bSUBJECTS\b|\bPOPULATION\b|\bSAMPLE\b")),
    ("StudyDesign", re.compile(r"\bDESIGN\b")),
    ("Setting", re.compile(r"\bSETTINGS?\b")),
)
_COMBINED = re.compile(r"\bMETHODS?\b|\bMATERIALS?\b|\bRESULTS?\b|\bCONCERNS?\b")


def labelled_fields(sections: list[Section]) -> dict[str, str]:
    """Field → section text for sections whose label names exactly one field ("INTERVENTIONS", "PATIENTS").

    Labels naming several fields ("DESIGN, SETTING, AND PARTICIPANTS") or mixed with methods/results
    ("PATIENTS AND METHODS") are left to the sentence cues, which read every section.
    """
    out: dict[str, str] = {}
    for section in sections:
        if not section.label or _COMBINED.search(section.label):
            continue
        named = [f for f, rx in SECTION_FIELDS if rx.search(section.label)]
        if len(named) == 1 and named[0] not in out:
            out[named[0]] = section.text
    return out


def _from_section(doc: Doc, field_name: str, cue: str, words: int = 30) -> Found | None:
    text = doc.labelled.get(field_name, "")
    if not text:
        return None
    first = sentences(text)[0] if sentences(text) else text
    return Found(_clip_words(first, words), f"section: {cue}")


# --------------------------------------------------------------------------- population

POP_NOUN = (
    r"(?:patients|subjects|participants|volunteers|adults|children|infants|neonates|newborns|adolescents|"
    r"women|men|outpatients|inpatients|individuals|people|persons|users|smokers|asthmatics|"
    r"mothers|families|students|workers|veterans|residents|survivors|recipients|"
    r"patient|subject|participant|individual|person|child|infant|woman|man)"
)
POP_WORDS = frozenset(_WORD.findall(POP_NOUN))
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
    if found:
        return found
    for phrase, cue in _population_candidates(doc):
        phrase = _clip_words(phrase.strip(" ,"), 20)
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
            rf"{_NO_EQ}({NUMBER})\s+(?:(?!of\b|studies\b|trials\b|groups\b|samples\b)[\w-]+\s+){{0,3}}?{POP_NOUN}\b",
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
    r"\s*;\s*(?:or\s+|and\s+)?|,?\s+(?:or|versus|vs\.?|compared (?:with|to))\s+(?:to\s+|with\s+)?|(?<=[\])]),\s+(?:and\s+|or\s+)?",
    re.I,
)
_PAIR_SEP = re.compile(r"\s+(?:and|with|to|or|versus|vs\.?)\s+", re.I)  # "comparison of A and B"
_ARM_END = re.compile(
    r"\s+(?:for (?:\d+|one|two|three|four|six|eight|twelve|a|the)\b|during|at (?:the|baseline)|after|"
    r"in (?:a|the|each|patients|the treatment)|while|until|with (?:a|the) (?:primary|aim)|and (?:were|was|then|followed|patients)|"
    r"who|which|were|was|is|are|to (?:compare|assess|evaluate)|prior to|before|as|over|on days?|followed by)\b|"
    r"\s*\((?:n|N)\s*=[^)]*\)|\s*\([^)]*\b(?:groups?|arms?|patients)\b[^)]*\)|[;:]",
    re.I,
)
_ARM_LEAD_WORDS = re.compile(
    r"^(?:(?:either|to|with|the|a|an|receive|treatment with|therapy with|therapy|treatment)\s+|"
    r"(?:\d+|one|two|three|four|six|eight|twelve)\s+(?:days?|weeks?|months?)\s+of\s+(?:[\w-]+\s+)?(?:treatment|therapy)\s+with\s+)+",
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
_AIM_COMPARE = re.compile(
    r"\b(?:to compare|we compared|compared|compares|comparing)\s+(?:the\s+)?(?:(?:\w+\s+){0,4}?(?:of|between)\s+)?"
    r"(?P<span>[^.]{3,120}?\s+(?:with|to|and|versus|vs\.?)\s+[^.]{3,120}?)"
    r"(?=\s+(?:in|for|on|among|as|after|during)\b|[,(]|\.\s|\.$|$)",
    re.I,
)
_VERSUS = re.compile(
    r"\s(?:versus|vs\.?)\s+(?P<c>[^,;:]{3,80}?)(?=\s+(?:in|for|on|among|as|after|during|has|have|was|were|is|are)\b|[,;:]|\.\s|\.$|$)",
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
    rf"^(?:efficacy|safety|tolerability|effects?|the|and|treatment|therapy|{POP_NOUN})\b|^(?:group|arm)\s*\w{{0,3}}$",
    re.I,
)
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


def _clean_arm(arm: str) -> str:
    stop = _ARM_END.search(arm)
    arm = arm[: stop.start()] if stop else arm
    arm = _ARM_LEAD_WORDS.sub("", arm.strip(" ,;"))
    arm = re.sub(r"\s+(?:and|or|with|in|of|used|given|administered)$", "", arm.replace(_KEEP, " "), flags=re.I)
    return _clip_words(arm, 18)


def _split_arms(text: str, separator: re.Pattern[str] = _ARM_SEP) -> list[str]:
    """Treatment arms of "A 20 mg or 40 mg, B or placebo" (dose-only pieces rejoin the arm before them)."""
    arms: list[str] = []
    for piece in _split_top(_protect(text), separator):
        arm = _clean_arm(piece)
        if not arm:
            continue
        if arms and _DOSE_ONLY.match(arm):
            arms[-1] = f"{arms[-1]} or {arm}"
        elif len(arm) > 2 and re.search(r"[A-Za-z]{3}", arm) and not _GENERIC_ARM.match(arm):
            arms.append(arm)
    return arms


def _key_word(arm: str) -> str:
    """The arm's first distinctive word (its drug or device), for matching against title and conclusions."""
    return next((w for w in re.findall(r"[a-z][\w-]{3,}", arm.lower()) if w not in _KEY_STOP), "")


def _rank_active(active: list[str], doc: Doc) -> list[str]:
    """Arms ordered experimental-first: sentences saying "A … superior to/than B" vote for A; the title breaks ties."""
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


def _versus_arms(text: str) -> list[str]:
    """The two sides of "… after A versus B …": A is the run of words before "versus" back to a preposition."""
    m = _VERSUS.search(text)
    if not m:
        return []
    start = _left_modifiers(text, m.start(), limit=6)
    left, right = _clean_arm(text[start : m.start()]), _clean_arm(m.group("c"))
    return [left, right] if len(left) > 2 and len(right) > 2 else []


def find_arms(doc: Doc) -> tuple[Found | None, Found | None]:
    """(I, C): labelled sections; the allocation sentence's arms; title, aim or "A versus B" comparisons; a treatment."""
    i_found = _from_section(doc, "I", "interventions")
    if i_found:
        return i_found, _from_section(doc, "C", "comparator") or _placebo(doc)
    for s in doc.methods:
        for lead in _ARMS_LEAD.finditer(s.text):
            arms = _split_arms(_ARM_GROUPS.sub("", s.text[lead.end() :]))
            if len(arms) >= 2:
                return _arms_found(arms, doc, f"arms: '{_snippet(s.text)}'")
    spans = [
        ("title versus", _TITLE_VERSUS, doc.title, _ARM_SEP),
        ("title comparison", _TITLE_COMPARISON, doc.title, _PAIR_SEP),
    ]
    spans += [("aim comparison", _AIM_COMPARE, s.text, _PAIR_SEP) for s in doc.methods]
    for where, rx, text, separator in spans:
        m = rx.search(_protect(text))
        if not m:
            continue
        arms = _split_arms(m.group("span"), separator)
        if len(arms) >= 2:
            i_found, c_found = _arms_found(arms, doc, f"{where}: '{_snippet(m.group(0), 80)}'")
            if i_found and c_found:
                return i_found, c_found
    for s in doc.methods:
        arms = _versus_arms(s.text)
        if arms:
            return Found(arms[0], f"versus: '{_snippet(s.text)}'"), Found(arms[1], f"versus: '{_snippet(s.text)}'")
    for text, where in [(doc.title, "title"), *((s.text, "abstract") for s in doc.methods)]:
        m = _TREATMENT.search(text)
        if m:
            value = _clean_arm(m.group("i") or m.group("i2"))
            if value and not _CONTROL_ARM.match(value) and not _GENERIC_ARM.match(value):
                return Found(value, f"{where} treatment phrase: '{_snippet(m.group(0), 80)}'"), _placebo(doc)
    return None, _placebo(doc)


def _placebo(doc: Doc) -> Found | None:
    m = re.search(r"\bplacebo\b", f"{doc.title} {doc.body}", re.I)
    return Found("placebo", "text mentions placebo") if m else None


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


__all__ = [
    "RULES_NAME",
    "Doc",
    "Found",
    "design_class",
    "extract",
    "is_rct_design",
    "parse_number",
    "sections_of",
    "sentences",
]
