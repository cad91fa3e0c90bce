"""Study design rules: publication types, MeSH and text cues; RCT and trial classes."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ra_agent.evidence.pico.text import Doc, Found, _clip_words, _snippet, sentences
from ra_agent.models import Paper

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
    ("meta-analysis", r"\bmeta[- ]?analys[ie]s\b|\bpooled analysis\b", "title"),
    (
        "meta-analysis",
        r"^(?:a |this )?meta[- ]?analysis\b|\bmeta[- ]?analysis of \d+|\bwe (?:performed|conducted|undertook) a meta[- ]?analysis",
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

# Publication kinds that report no trial of their own, whatever trials they mention.
NON_TRIAL_CLASSES = frozenset(
    {"meta-analysis", "systematic review", "narrative review", "protocol", "editorial", "letter", "comment",
     "guideline", "case report"}
)  # fmt: skip
_NO_QUALIFIERS = NON_TRIAL_CLASSES

# What a title says the publication is (checked before any trial cue, so "a review of … randomised trials" is a review).
TITLE_KINDS: tuple[tuple[str, str], ...] = (
    ("meta-analysis", r"\bmeta[- ]?analys[ie]s\b|\bpooled analysis of (?:\w+ ){0,3}(?:trials|studies)\b"),
    ("systematic review", r"\bsystematic (?:literature )?review\b|\bcochrane review\b"),
    ("protocol", r"\b(?:study|trial) protocol\b|\bprotocol (?:for|of) (?:a|an|the)\b|\brationale and design\b|"
     r"\bdesign and rationale\b|:\s*(?:a |the )?protocol\b"),
    ("editorial", r"^editorial\b|\beditorial\W*$"),
    ("letter", r"^(?:letter|correspondence|re)\s*:|\bletter to the editor\b|\bin reply\b|\breply to\b"),
    ("comment", r"^comments?\b|\bcomments? on\b|\bcommentary\b"),
    ("guideline", r"\bguidelines? (?:for|on|of)\b|^(?:[\w-]+ ){0,3}guidelines?\b|\bpractice guidelines?\b|\bguidelines?\W*$|"
     r"\bconsensus (?:statement|conference|report)\b|\bposition (?:statement|paper)\b|\brecommendations (?:for|on|of)\b"),
    ("case report", r"\bcase reports?\b|(?:^|:\s*)(?:an? )?(?:[\w-]+ )?case of\b|\breport of (?:a|an|one|two|three) cases?\b"),
    ("narrative review",
     r"(?<!chart )(?<!record )(?<!retrospective )(?<!case )(?<!peer )\breview\b(?! of (?:\w+ )?(?:records|charts|cases))|"
     r"\boverview\b|\bupdate on\b|\bcurrent concepts\b|\bstate of the art\b"),
)  # fmt: skip
_TITLE_KIND_RES = tuple((cls, re.compile(p, re.I)) for cls, p in TITLE_KINDS)

# A title phrase that is about a guideline or review rather than being one ("adherence to the guidelines for …").
_ABOUT_KIND = re.compile(
    r"(?:adherence to|compliance with|implementation of|implications of|impact of|according to|based on|use of|"
    r"following|concordance with|effect of)\s+(?:the\s+)?(?:[\w-]+\s+){0,4}$",
    re.I,
)
# How an abstract says it reviews rather than reports a trial: literature searches (systematic), review aims (narrative).
REVIEW_TEXT = (
    (
        "systematic review",
        r"\b(?:searches|a search) of (?:the )?(?:medline|pubmed|embase)\b|\b(?:medline|pubmed|embase) search(?:es)?\b|"
        r"\bwe searched\b|\bliterature search\b|\b(?:articles|studies|trials|reports) were (?:identified|obtained|located|"
        r"retrieved) (?:through|by|via|from)\b",
    ),
    (
        "narrative review",
        r"^(?:objectives?:?\s+|purpose:?\s+|aims?:?\s+)?to (?:review|summari[sz]e)\b|\b(?:this|the present|our|in this) "
        r"(?:\w+ )?review\b|\bwe (?:review|summari[sz]e)\b|\b(?:a )?review of the literature\b|\bliterature review\b|"
        r"\bthis (?:article|paper) (?:reviews|summari[sz]es|discusses)\b",
    ),
)
_REVIEW_TEXT_RES = tuple((cls, re.compile(p, re.I | re.M)) for cls, p in REVIEW_TEXT)
_TITLE_TRIAL = re.compile(
    _NOT_RANDOM + r"\brandomi[sz]ed\b(?! (?:controlled |clinical )?trials\b)|\b(?:double|single|triple)[- ]blind|"
    r"\bplacebo[- ]controlled\b|\bcontrolled (?:clinical )?trial\b|\bphase (?:I{1,3}V?|IV|[1-4])[ab]? (?:\w+ )?(?:trial|study)\b",
    re.I,
)


def publication_kind(title: str) -> tuple[str, str] | None:
    """(non-trial class, cue) when the title names a review, meta-analysis, protocol, editorial, letter, comment,
    guideline or case report."""
    for cls, rx in _TITLE_KIND_RES:
        for m in rx.finditer(title):
            if not _ABOUT_KIND.search(title[: m.start()]):
                return cls, f"title: '{_snippet(m.group(0), 60)}'"
    return None


def review_by_text(title: str, text: str) -> tuple[str, str] | None:
    """(review class, cue) when an abstract whose title names no trial searches or reviews the literature."""
    if _TITLE_TRIAL.search(title):
        return None
    for cls, rx in _REVIEW_TEXT_RES:
        m = rx.search(text)
        if m:
            return cls, f"text: '{_snippet(m.group(0), 60)}'"
    return None


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
_PHASE = re.compile(  # a development phase ("a phase III trial"), not a period of the trial ("ranitidine in phase I")
    r"\b(?:a|this) phase (I{1,3}V?|IV|[1-4])([ab])?\b|\bphase (I{1,3}V?|IV|[1-4])([ab])? (?:\w+ )?(?:trial|study)\b",
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
    masking = comparison_masking([q for q in unique if q in MASKINGS], text, paper)
    return [q for q in unique if q not in MASKINGS or q == masking]


MASKINGS = ("double-blind", "single-blind", "open-label")  # most blinded first
_RANDOMISED = re.compile(_NOT_RANDOM + r"\brandomi[sz]|\brandomly\b", re.I)


def comparison_masking(maskings: list[str], text: str, paper: Paper) -> str:
    """The one masking of the comparison the trial tests, when the abstract names several (an open-label run-in or
    extension around a double-blind phase): MeSH's, else the title's, else the one named with the randomisation,
    else the most blinded. "" when none is named."""
    if len(maskings) < 2:
        return maskings[0] if maskings else ""
    by_mesh = [name for heading, name in MESH_QUALIFIERS if heading in set(paper.mesh) and name in maskings]
    cues = dict(_QUALIFIER_RES)
    said = [[m for m in MASKINGS if m in maskings and cues[m].search(where)]
            for where in (paper.title, *(s for s in sentences(text) if _RANDOMISED.search(s)))]  # fmt: skip
    return next((named[0] for named in (by_mesh, *said) if named), next(m for m in MASKINGS if m in maskings))


def non_trial_kind(title: str, pub_types: Iterable[str]) -> tuple[str, str] | None:
    """(non-trial class, cue) from a non-trial publication type, else from a title naming a review, protocol,
    editorial, letter, comment, guideline or case report."""
    by_type = design_from_pub_types(pub_types)
    if by_type and by_type[0] in NON_TRIAL_CLASSES:
        return by_type[0], f"pub_type: {by_type[1]}"
    return publication_kind(title)


def find_design(doc: Doc) -> Found | None:
    """Design class: a non-trial publication kind first (title or review phrasing), then publication type, text
    cues or MeSH, else the DESIGN section; with its qualifiers."""
    kind = non_trial_kind(doc.title, doc.paper.pub_types)
    if kind:
        return Found(*kind)
    found = _study_design(doc)
    if found is None or design_class(found.value) in _TRIAL_CLASSES:
        review = review_by_text(doc.title, "\n".join(s.text for s in doc.sentences))
        if review:
            return Found(*review)
    return found


def _study_design(doc: Doc) -> Found | None:
    """The design class a trial or observational study reports (publication type, text cues, MeSH, DESIGN section)."""
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

# A StudyDesign string that opens with a non-trial kind ("Systematic review of RCTs") names no trial of its own.
_NON_TRIAL_DESIGN = re.compile(
    r"^\W*(?:an? |the )?(?:systematic |narrative |literature |critical )?(?:review|meta[- ]?analysis|pooled analysis|"
    r"(?:study |trial )?protocol|editorial|letter|comment|guideline|consensus|case report)",
    re.I,
)


def is_rct_design(design: str) -> bool:
    """True when a StudyDesign string (rules or LLM) names a randomised trial (not a review or protocol of them)."""
    if not design or _NON_TRIAL_DESIGN.search(design) or re.search(r"\bnon-?randomi[sz]ed\b", design, re.I):
        return False
    return bool(RCT_DESIGN.search(design))


def design_class(design: str) -> str:
    """The design class of any StudyDesign string ("" when none is recognised), for comparisons."""
    if is_rct_design(design):
        return "RCT"
    found = publication_kind(design) if _NON_TRIAL_DESIGN.search(design) else None
    found = found or design_from_text(design)
    return found[0] if found else design.split("(")[0].strip().lower()


def publication_kinds(store) -> dict[str, dict[str, int]]:
    """Corpus counts for the `papers` asset: `article_type` (the records' own publication types; "(none
    recorded)" for exports without them, as the bundled Cohen CSV) and `kind` (rule: a non-trial publication
    type or title kind, else a design publication type, else the title's design cue; "(no cue)" otherwise)."""
    import json
    from collections import Counter

    types: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    for title, pub_types, article_type in store.conn.execute("SELECT title, pub_types, article_type FROM paper"):
        types[article_type or "(none recorded)"] += 1
        pts = json.loads(pub_types or "[]")
        if not title.strip():
            kinds["(no title)"] += 1
            continue
        found = non_trial_kind(title, pts) or design_from_pub_types(pts) or design_from_text(title)
        kinds[found[0] if found else "(no cue)"] += 1
    return {"article_type": dict(types.most_common()), "kind": dict(kinds.most_common())}
