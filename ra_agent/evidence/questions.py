"""Review questions: a goal's eligible trials grouped as a reviewer would write them (P × I × C), and whether
a review already answers each one.

A `Topic` is what a goal is about: the concepts of its handbook's seed query (population concepts such as
"cancer" and "central venous catheter", and the intervention concept, e.g. "anticoagulants", placed in its
class by `evidence.classes`). Inside it:

- `eligibility(paper, topic)` says whether a record is a trial a reviewer would accept for the topic's
  treatment question, and why (randomised, in humans with the condition, testing an agent of the class;
  reviews, animal, healthy-volunteer, pharmacokinetic and mechanism studies, protocols without results and
  other conditions are not), every answer with its reason;
- `build_questions` groups the eligible trials into the topic's own question (the topic's population ×
  intervention class × any comparator) and the narrower questions beneath it (a narrower class × one
  comparator), each a plain `ReviewQuestion` with a stable id (hash of its normalised P, I and C);
- `assess_coverage` finds the reviews whose own question (title and abstract: every population concept and
  an intervention of the question's class, a broader or a narrower one) encompasses the question, and what
  share of its trials each could have included (its reference list when the store holds it, else the trials
  published no later than the review); the newest such review with at least [sr] sr_overlap_pivot of the
  trials covers it. Trials published after it are counted: from [questions] update_after_trials on, the
  verdict is "covered, update warranted" (a review's median survival before it needs an update is 5.5 years:
  Shojania KG et al., Ann Intern Med 2007;147:224-33).

All judgements here are rules over real fields (title, abstract, MeSH headings, publication types, year,
references) and name themselves "rules" in every output (`RULES`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ra_agent.evidence.classes import PLACEBO, Agent, agents_in, classes_named, lineage
from ra_agent.evidence.question_judge import judge_review, judge_trials
from ra_agent.evidence.reviews import cue_reason, is_review
from ra_agent.models import Paper

RULES = "rules (evidence.questions: title, abstract, MeSH headings, publication types, year)"
MEDIAN_REVIEW_SURVIVAL = (
    "median survival of a review before it needs an update: 5.5 years (Shojania et al., Ann Intern Med 2007)"
)

# Entry terms of a few common concepts, after MeSH's entry terms and PubMed's automatic term mapping (a
# seed-query word found here matches all of them; any other concept matches its own words).
ENTRY_TERMS: dict[str, tuple[str, ...]] = {
    "cancer": (r"cancers?", r"neoplas\w*", r"tumou?rs?", r"malignan\w*", r"carcinom\w*", r"oncolog\w*",
               r"leuka?emi\w*", r"lymphoma\w*", r"myeloma\w*", r"sarcoma\w*", r"metasta\w*", r"chemotherap\w*",
               r"haematolog\w* malignan\w*", r"hematolog\w* malignan\w*"),
    "central venous catheter": (r"central ve\w+ (?:access )?(?:catheters?|lines?|devices?|ports?)", r"CVCs?",
                                r"central lines?", r"venous access (?:devices?|ports?)", r"port-?a-?caths?",
                                r"implant\w* ports?", r"Hickman\w*", r"PICCs?",
                                r"peripherally inserted central (?:venous )?catheters?",
                                r"(?:indwelling|tunnel+ed|long-term) (?:venous |central )?catheters?",
                                r"catheter-related"),
    "gastroesophageal reflux": (r"gastro-?o?esophageal reflux\w*", r"GERD", r"GORD", r"reflux o?esophagitis",
                                r"erosive o?esophagitis", r"o?esophagitis", r"heartburn", r"acid reflux",
                                r"reflux disease"),
    "depression": (r"depress\w*", r"MDD", r"dysthymi\w*"),
    "anxiety": (r"anxi\w*", r"panic\w*", r"phobi\w*"),
    "epilepsy": (r"epilep\w*", r"seizures?", r"convulsions?"),
    "post-traumatic stress disorder": (r"post-?traumatic stress\w*", r"PTSD"),
    "schizophrenia": (r"schizophreni\w*", r"psychos[ie]s", r"psychotic"),
    "venous thromboembolism": (r"venous thromboembolism", r"VTE", r"deep ve\w+ thrombos[ie]s", r"DVT",
                               r"pulmonary embol\w*"),
}  # fmt: skip
_SPELLING = ((r"oesophag", "esophag"), (r"tumour", "tumor"), (r"haem", "hem"), (r"randomis", "randomiz"),
             (r"behaviour", "behavior"), (r"paediatr", "pediatr"), (r"leukaem", "leukem"), (r"anaem", "anem"),
             (r"oedema", "edema"), (r"foetal", "fetal"))  # fmt: skip

RANDOMISED_TYPES = ("Randomized Controlled Trial", "Controlled Clinical Trial", "Pragmatic Clinical Trial")
RANDOMISED_MESH = ("Random Allocation", "Double-Blind Method", "Single-Blind Method")
# Trial-report wording (one trial randomised its participants); "randomized trials" in the plural is how reviews
# and commentaries speak, so it is not a cue.
RANDOMISED_TEXT = re.compile(
    r"\b(?:were|was|are|is|been) (?:\w+ )?randomi[sz]ed\b|\brandomly (?:assigned|allocated|divided|selected)\b"
    r"|\brandomi[sz]ed (?:to|into|in a|between)\b|(?<!non-)\brandomi[sz]ation\b"
    r"|\b(?:a|an|this|our|the present|prospective|open|double-blind|multicent\w+)[, ]+(?:[\w-]+[, ]+){0,4}?"
    r"randomi[sz]ed\b(?:[, ]+[\w-]+){0,4}?[, ]+(?:trial|study)\b",
    re.I,
)
NOT_RANDOMISED = re.compile(r"\bnon-?randomi[sz]ed\b|\bretrospective\w*|\bcase series\b|\bcohort study\b", re.I)
ANIMAL_TEXT = re.compile(r"\b(?:rats?|mice|murine|rabbits?|dogs?|canine|pigs?|porcine|sheep|ovine|primates?|"
                         r"in vitro|ex vivo|cell lines?)\b", re.I)  # fmt: skip
HEALTHY = re.compile(r"\bhealthy (?:volunteers?|subjects?|men|women|adults?|participants?)\b", re.I)
MECHANISM = re.compile(r"\bpharmacokinetic\w*|\bpharmacodynamic\w*|\bbioavailab\w*|\bbioequival\w*|\bmechanism\w*\b"
                       r"|\bplasma (?:levels?|concentrations?)\b", re.I)  # fmt: skip
LOCAL_USE = re.compile(
    r"\b(?:locks?|locking|flush\w*|coated|coating|bonded|heparini[sz]ed|impregnated|solutions?)\b", re.I
)
PROTOCOL = re.compile(r"\brationale and design\b|\bstudy protocol\b|\bprotocol for a\b|\bdesign of (?:a|the)\b", re.I)


def normalise(text: str) -> str:
    """Lower-case text with British spellings made American (oesophagus → esophagus), for matching only."""
    out = (text or "").lower()
    for old, new in _SPELLING:
        out = out.replace(old, new)
    return out


# ============================================================================ topic


@dataclass(frozen=True)
class Concept:
    """One concept of a topic: its words as the user wrote them and the patterns that find it in a record."""

    label: str
    patterns: tuple[str, ...]

    @property
    def regex(self) -> re.Pattern[str]:
        """The concept's words (abbreviations excepted), matched in `normalise`d text."""
        return _compile(tuple(p for p in self.patterns if not _is_abbreviation(p)))

    def find(self, text: str) -> str | None:
        """The first words in `text` that express this concept, or None (abbreviations match case-sensitively)."""
        match = self.regex.search(normalise(text))
        if match:
            return match.group(0)
        capitals = [p for p in self.patterns if _is_abbreviation(p)]
        match = re.search(rf"\b(?:{'|'.join(capitals)})\b", text or "") if capitals else None
        return match.group(0) if match else None


def _is_abbreviation(pattern: str) -> bool:
    bare = pattern.removesuffix("s?")
    return bare.isalpha() and bare.isupper()


_compiled: dict[tuple[str, ...], re.Pattern[str]] = {}


def _respell(pattern: str) -> str:
    """A pattern with the British spellings `normalise` rewrites made American (regex escapes untouched)."""
    for old, new in _SPELLING:
        pattern = pattern.replace(old, new)
    return pattern


def _compile(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One case-insensitive regex for `patterns`, to be searched in `normalise`d text."""
    if patterns not in _compiled:
        _compiled[patterns] = re.compile(rf"\b(?:{'|'.join(_respell(p) for p in patterns) or '(?!)'})\b", re.I)
    return _compiled[patterns]


def _word_patterns(label: str) -> tuple[str, ...]:
    """The patterns of a concept: its entry terms when ENTRY_TERMS knows it, else its own words in order
    (each word with any ending, up to two words between them)."""
    key = normalise(label).strip()
    for name, terms in ENTRY_TERMS.items():
        if key in {normalise(name), *(normalise(t) for t in terms)} or re.fullmatch(
            _compile(terms).pattern.removeprefix(r"\b(?:").removesuffix(r")\b"), key
        ):
            return tuple(terms)
    words = [re.escape(w.rstrip("s")) for w in re.findall(r"[\w-]+", key)]
    return (r"\w*\W+(?:\w+\W+){0,2}?".join(words) + r"\w*",) if words else ()


@dataclass(frozen=True)
class Topic:
    """A goal's topic: population concepts (all must hold) and intervention classes (one must hold)."""

    population: tuple[Concept, ...]
    intervention: tuple[str, ...]  # class names (evidence.classes); empty = any treatment
    seed_query: str = ""

    @classmethod
    def from_seed_query(cls, seed_query: str) -> Topic:
        """Concepts of a boolean seed query: each AND-clause is one concept (its OR-alternatives its terms);
        a clause naming a treatment class or agent is the intervention, every other clause a population
        concept. Field tags ([tiab], [mh]) and quotes are dropped."""
        text = re.sub(r"\[[^\]]*\]|\"", " ", seed_query or "")
        population, intervention = [], []
        for clause in re.split(r"\s+AND\s+", text):
            alternatives = [a.strip(" ()") for a in re.split(r"\s+OR\s+", clause.strip(" ()")) if a.strip(" ()")]
            if not alternatives:
                continue
            named = [c for a in alternatives for c in (*classes_named(a), *(ag.cls for ag in agents_in(a)))]
            if named:
                intervention.extend(c for c in named if c not in intervention)
            else:
                patterns = tuple(p for a in alternatives for p in _word_patterns(a))
                population.append(Concept(" or ".join(alternatives), patterns))
        return cls(tuple(population), tuple(intervention), seed_query)

    def with_abbreviations(self, papers: Iterable[Paper]) -> Topic:
        """The topic with the abbreviations the records define for its concepts ("central venous catheter
        (CVC)" → CVC also matches), read from the records themselves."""
        found: dict[str, set[str]] = {c.label: set() for c in self.population}
        for paper in papers:
            for match in re.finditer(r"((?:[\w-]+\s+){1,6}?)\(([A-Z]{3,6})s?\)", paper.abstract or ""):
                abbreviation = match.group(2)
                words = re.findall(r"[A-Za-z]+", match.group(1))[-len(abbreviation) :]
                if "".join(w[0] for w in words).upper() != abbreviation:
                    continue  # the letters must be the initials of the words just before them
                for concept in self.population:
                    if concept.regex.fullmatch(normalise(" ".join(words))) and len(found[concept.label]) < 5:
                        found[concept.label].add(abbreviation)
        population = tuple(
            Concept(c.label, c.patterns + tuple(sorted(a for a in found[c.label] if a not in c.patterns)))
            for c in self.population
        )
        return Topic(population, self.intervention, self.seed_query)

    def describe(self) -> str:
        parts = [f"population: {' AND '.join(c.label for c in self.population) or 'any'}",
                 f"intervention: {' or '.join(self.intervention) or 'any treatment'}"]  # fmt: skip
        return "; ".join(parts)

    def tested_agents(self, paper: Paper) -> list[Agent]:
        """Agents of the topic's classes that the record tests: named in its title (in the first arm when
        the title compares "A versus B"), else in an abstract sentence that randomises or assigns."""
        title = paper.title or ""
        first_arm = re.split(r"\s+(?:versus|vs\.?|compared (?:with|to))\s+", title, maxsplit=1, flags=re.I)[0]
        sentences = [s for s in re.split(r"(?<=[.;])\s+", paper.abstract or "") if RANDOMISED_TEXT.search(s)]
        out = []
        for agent in agents_in(f"{title} {paper.abstract}"):
            if self.intervention and not any(agent.in_class(c) or c in lineage(agent.cls) for c in self.intervention):
                continue
            word = re.compile(rf"\b{re.escape(agent.word)}\b", re.I)
            if word.search(first_arm) or (not word.search(title) and any(word.search(s) for s in sentences)):
                out.append(agent)
        return out


_COMPARE = re.compile(r"\bvs\.?\b|\bversus\b|\bcompared (?:with|to)\b|\bor placebo\b|\breceived\b|\bassigned\b", re.I)


# ============================================================================ eligibility


@dataclass(frozen=True)
class Eligibility:
    """Whether a record is an eligible trial for a topic, why, and what it tests against what."""

    pmid: int
    eligible: bool
    reason: str
    agents: tuple[Agent, ...] = ()
    comparator: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"pmid": self.pmid, "eligible": self.eligible, "reason": self.reason,
                "agents": [a.word for a in self.agents], "comparator": self.comparator}  # fmt: skip


def randomised(paper: Paper) -> str | None:
    """Why a record reports a randomised trial, or None."""
    return cue_reason(paper, RANDOMISED_TYPES, RANDOMISED_TEXT, RANDOMISED_MESH)


def _about_trials(paper: Paper) -> str | None:
    """A record indexed as being *about* trials (MeSH "... as Topic") with no trial publication type or
    randomisation heading is a commentary or review of trials, not a trial report."""
    topics = [h for h in paper.mesh if h.endswith("Trials as Topic")]
    if topics and not any(t in paper.pub_types for t in RANDOMISED_TYPES) and "Random Allocation" not in paper.mesh:
        return f"MeSH {topics[0]}"
    return None


def _in_animals(paper: Paper) -> str | None:
    mesh = set(paper.mesh)
    if "Animals" in mesh and "Humans" not in mesh:
        return "MeSH Animals without Humans"
    if "Humans" in mesh:
        return None
    match = ANIMAL_TEXT.search(paper.title or "")
    return f"title says {match.group(0)!r}" if match else None


def _local_use(paper: Paper, agent: Agent) -> bool:
    """Whether every mention of `agent` is as a lock, flush or coating of a device ("heparin lock")."""
    text = f"{paper.title} {paper.abstract}"
    mentions = [m.start() for m in re.finditer(rf"\b{re.escape(agent.word)}\b", text, re.I)]
    return bool(mentions) and all(LOCAL_USE.search(text[max(0, i - 40) : i + len(agent.word) + 40]) for i in mentions)


def comparator_of(paper: Paper, agents: Sequence[Agent], topic: Topic | None = None) -> str:
    """The comparator a trial tests its agents against: the class of another agent named in the title's second
    arm or in a sentence that randomises or compares (not the tested class, not a word of the topic's population
    such as "chemotherapy" for cancer), "another <class>" (two agents of one class, head to head), "placebo or no treatment",
    else "dose, schedule or unclear comparator"."""
    text = f"{paper.title} {paper.abstract}"
    tested = agents[0].cls if agents else ""
    arms = re.split(r"\s+(?:versus|vs\.?|compared (?:with|to)|or)\s+", paper.title or "", maxsplit=1, flags=re.I)[1:]
    sentences = [
        s for s in re.split(r"(?<=[.;])\s+", paper.abstract or "") if RANDOMISED_TEXT.search(s) or _COMPARE.search(s)
    ]
    population = topic.population if topic else ()
    others = [a for a in agents_in(" ".join([*arms, *sentences])) if not any(c.find(a.word) for c in population) and a.cls != tested and tested not in lineage(a.cls)
              and a.cls not in lineage(tested)]  # fmt: skip
    if others:
        return others[0].cls
    if len({a.word for a in agents if a.cls == tested and not _is_abbreviation(a.word.upper())}) >= 2:
        return f"another {tested}"
    if PLACEBO.search(text):
        return "placebo or no treatment"
    return "dose, schedule or unclear comparator"


def eligibility(paper: Paper, topic: Topic) -> Eligibility:
    """Whether `paper` is a trial a reviewer would accept for the topic's treatment question, and why."""
    pmid = paper.pmid
    if why := is_review(paper):
        return Eligibility(pmid, False, f"a review ({why})")
    if PROTOCOL.search(paper.title or ""):
        return Eligibility(pmid, False, "a trial protocol or design paper (no results)")
    design = randomised(paper)
    if design is None:
        return Eligibility(pmid, False, "not a randomised trial (no publication type, MeSH or text cue)")
    if why := _about_trials(paper):
        return Eligibility(pmid, False, f"about trials, not a trial report ({why})")
    if match := NOT_RANDOMISED.search(paper.title or ""):
        return Eligibility(pmid, False, f"not randomised (title says {match.group(0)!r})")
    if why := _in_animals(paper):
        return Eligibility(pmid, False, f"not in humans ({why})")
    if match := HEALTHY.search(f"{paper.title} {paper.abstract}"):
        return Eligibility(pmid, False, f"healthy volunteers ({match.group(0)!r})")
    if match := MECHANISM.search(paper.title or ""):
        return Eligibility(pmid, False, f"a pharmacokinetic or mechanism study (title says {match.group(0)!r})")
    text = f"{paper.title} {paper.abstract} {' '.join(paper.mesh)}"
    found = []
    for concept in topic.population:
        words = concept.find(text)
        if words is None:
            return Eligibility(pmid, False, f"another condition or population (no {concept.label!r})")
        found.append(f"{concept.label} ({words!r})")
    agents = topic.tested_agents(paper)
    title_agents = agents_in(paper.title or "")
    if title_agents and not any(a in agents for a in title_agents) and topic.intervention:
        other = title_agents[0]
        return Eligibility(pmid, False, f"tests {other.word} ({other.cls}), not {' or '.join(topic.intervention)}")
    if agents and (LOCAL_USE.search(paper.title or "") or all(_local_use(paper, a) for a in agents)):
        return Eligibility(pmid, False, f"{agents[0].word} used as a device lock, flush or coating (not a treatment)")
    if not agents:
        wanted = " or ".join(topic.intervention) or "a treatment"
        return Eligibility(pmid, False, f"does not test {wanted}")
    comparator = comparator_of(paper, agents, topic)
    tested = ", ".join(f"{a.word} ({a.cls})" for a in agents[:3])
    reason = (
        f"randomised ({design}); in humans with {'; '.join(found) or 'the condition'}; tests {tested}; vs {comparator}"
    )
    return Eligibility(pmid, True, reason, tuple(agents), comparator)


# ============================================================================ questions


@dataclass
class CoveringReview:
    """A review whose own question encompasses a review question, and what it could have included."""

    pmid: int
    year: int | None
    title: str
    why: str  # the words of its title/abstract that match the question's population and intervention
    basis: str  # "reference list" or "publication year"
    trials_covered: list[int]
    share: float

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ReviewQuestion:
    """One question a reviewer would write: population × intervention (class) × comparator, its eligible
    trials (each with its reason) and what reviews already answer it.

    Plain data: `trial_pmids`, `intervention`, `comparator` are what later stages (comparisons, pooling)
    read; `verdict` and the metrics are filled by `assess_coverage`.
    """

    id: str
    population: str
    intervention: str  # a class name from evidence.classes (or the agent when it has no class)
    comparator: str  # "any" for the topic's own question
    outcomes: list[str] = field(default_factory=list)
    trials: dict[int, str] = field(default_factory=dict)  # PMID -> why it is eligible
    years: dict[int, int | None] = field(default_factory=dict)
    parent: str | None = None  # id of the broader question this one narrows
    reviews: list[CoveringReview] = field(default_factory=list)  # every review encompassing it, newest first
    covering: CoveringReview | None = None  # the newest review holding >= pivot of its trials
    trials_since: list[int] = field(default_factory=list)  # eligible trials published after `covering`
    verdict: str = ""
    verdict_reason: str = ""
    judged_by: str = RULES
    unchecked: list[str] = field(default_factory=list)  # what this (offline) run could not check

    @property
    def trial_pmids(self) -> list[int]:
        return sorted(self.trials)

    @property
    def pico(self) -> str:
        versus = "any comparator" if self.comparator == "any" else self.comparator
        return f"P: {self.population} · I: {self.intervention} · C: {versus}"

    @property
    def metrics(self) -> dict[str, Any]:
        """eligible_trials, newest_trial (year), sr_overlap (share the covering review could include) and
        PRISMA_compliant (None: not checked by these rules)."""
        years = [y for y in self.years.values() if y is not None]
        return {
            "eligible_trials": len(self.trials),
            "newest_trial": max(years) if years else None,
            "sr_overlap": self.covering.share if self.covering else 0.0,
            "PRISMA_compliant": None,
            "trials_since_review": len(self.trials_since),
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "population": self.population, "intervention": self.intervention,
            "comparator": self.comparator, "pico": self.pico, "outcomes": self.outcomes,
            "trials": {str(k): v for k, v in sorted(self.trials.items())},
            "years": {str(k): v for k, v in sorted(self.years.items())}, "parent": self.parent,
            "reviews": [r.as_dict() for r in self.reviews],
            "covering": self.covering.as_dict() if self.covering else None,
            "trials_since": self.trials_since, "verdict": self.verdict, "verdict_reason": self.verdict_reason,
            "judged_by": self.judged_by, "unchecked": self.unchecked, "metrics": self.metrics,
        }  # fmt: skip


def question_id(population: str, intervention: str, comparator: str) -> str:
    """Stable id of a question: "q-" + the first 10 hex of sha1 over its normalised P|I|C."""
    key = "|".join(" ".join(normalise(part).split()) for part in (population, intervention, comparator))
    return "q-" + hashlib.sha1(key.encode()).hexdigest()[:10]


OUTCOME_CUES = re.compile(
    r"\b(thrombos[ie]s|thromboembolism|bleeding|h[a]?emorrhage|mortality|death|survival|infection|healing|relapse|"
    r"recurrence|remission|response|symptom\w*|quality of life|adverse events?|occlusion|heartburn)\b",
    re.I,
)


def _outcomes(papers: Iterable[Paper], limit: int = 5) -> list[str]:
    counts: dict[str, int] = {}
    for paper in papers:
        for word in {m.group(1).lower() for m in OUTCOME_CUES.finditer(f"{paper.title} {paper.abstract}")}:
            counts[word] = counts.get(word, 0) + 1
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]]


def build_questions(
    topic: Topic, papers: Sequence[Paper], judge: Any = None
) -> tuple[list[ReviewQuestion], dict[int, Eligibility]]:
    """The topic's own question (every eligible trial) and the narrower ones beneath it (the narrowest class
    each trial tests × its comparator), with every record's eligibility answer. A `judge`
    (`evidence.question_judge`) checks the trials the rules admit; None: the rules alone."""
    judged = {p.pmid: eligibility(p, topic) for p in papers}
    by_pmid = {p.pmid: p for p in papers}
    population = " and ".join(c.label for c in topic.population) or "any population"
    intervention = " or ".join(topic.intervention) or "any treatment"
    root = ReviewQuestion(question_id(population, intervention, "any"), population, intervention, "any")
    if judge is not None:  # the seam for LLM judgements (issue 23 item 5)
        judged = judge_trials(judge, root, by_pmid, judged)
        root.judged_by = judge.name
    narrower: dict[tuple[str, str], ReviewQuestion] = {}
    for pmid, answer in judged.items():
        if not answer.eligible:
            continue
        root.trials[pmid], root.years[pmid] = answer.reason, by_pmid[pmid].year
        cls = answer.agents[0].cls
        key = (cls, answer.comparator)
        if key not in narrower:
            narrower[key] = ReviewQuestion(question_id(population, cls, answer.comparator), population, cls,
                                           answer.comparator, parent=root.id, judged_by=root.judged_by)  # fmt: skip
        narrower[key].trials[pmid], narrower[key].years[pmid] = answer.reason, by_pmid[pmid].year
    questions = [root, *sorted(narrower.values(), key=lambda q: (-len(q.trials), q.id))]
    for question in questions:
        question.outcomes = _outcomes(by_pmid[p] for p in question.trials)
    return questions, judged


# ============================================================================ coverage


def encompasses(review: Paper, question: ReviewQuestion, topic: Topic) -> str | None:
    """Why `review`'s own question (title and abstract) encompasses `question`, or None: it names every
    population concept of the topic and an intervention of the question's class, a broader or a narrower one."""
    text = f"{review.title} {review.abstract} {' '.join(review.mesh)}"
    said = []
    for concept in topic.population:
        words = concept.find(text)
        if words is None:
            return None
        said.append(repr(words))
    wanted = set(lineage(question.intervention)) if question.comparator != "any" else set(topic.intervention)
    for agent in agents_in(text):
        if agent.cls in wanted or wanted & set(lineage(agent.cls)) or question.intervention in lineage(agent.cls):
            return f"its title/abstract names {', '.join(said)} and {agent.word!r} ({agent.cls})"
    return None


def _no_later(year: int | None, than: int | None) -> bool:
    return year is not None and than is not None and year <= than


def assess_coverage(
    questions: Sequence[ReviewQuestion],
    reviews: Sequence[Paper],
    topic: Topic,
    *,
    pivot: float,
    update_after: int,
    min_trials: int,
    references: Mapping[int, set[int]] | None = None,
    judge: Any = None,
) -> None:
    """Fill each question's reviews, covering review, trials since it and verdict (see the module text). A `judge`
    (`evidence.question_judge`) checks the reviews the rules find encompassing; None: the rules alone."""
    references = references or {}
    for question in questions:
        question.reviews = []
        for review in sorted(reviews, key=lambda r: (-(r.year or 0), r.pmid)):
            why = encompasses(review, question, topic)
            if judge is not None:  # the seam for LLM judgements (issue 23 item 5)
                why = judge_review(judge, question, review, why)
            if why is None:
                continue
            cited = references.get(review.pmid, set())
            if cited:
                basis, covered = "reference list", [p for p in question.trial_pmids if p in cited]
            else:
                basis = "publication year"
                covered = [p for p in question.trial_pmids if _no_later(question.years.get(p), review.year)]
            share = round(len(covered) / len(question.trials), 4) if question.trials else 0.0
            question.reviews.append(CoveringReview(review.pmid, review.year, review.title, why, basis, covered, share))
        holding = [r for r in question.reviews if r.share >= pivot]
        question.covering = holding[0] if holding else None
        question.unchecked = ["PRISMA compliance of the covering reviews (no full text offline)",
                              "trials outside the local corpus (PubMed was not searched again)",
                              "each trial's full text (eligibility read from title, abstract and MeSH)"]  # fmt: skip
        if question.covering is not None:
            year = question.covering.year
            question.trials_since = [p for p in question.trial_pmids
                                     if year is not None and (question.years.get(p) or 0) > year]  # fmt: skip
            name = f"PMID {question.covering.pmid} ({year})"
            if len(question.trials_since) >= update_after:
                question.verdict = "covered, update warranted"
                question.verdict_reason = (f"{len(question.trials_since)} trials since {name} "
                                           f"(update after {update_after}; {MEDIAN_REVIEW_SURVIVAL})")  # fmt: skip
            else:
                question.verdict = "covered"
                question.verdict_reason = (f"{name} could include {len(question.covering.trials_covered)} of "
                                           f"{len(question.trials)} trials; {len(question.trials_since)} since")  # fmt: skip
        elif len(question.trials) < min_trials:
            question.verdict, question.verdict_reason = "too few trials", f"{len(question.trials)} < {min_trials}"
        else:
            question.verdict = "gap"
            best = max(question.reviews, key=lambda r: r.share, default=None)
            question.verdict_reason = (
                f"{len(question.trials)} eligible trials; no review encompassing the question holds >= {pivot:.0%} of them"
                + (f" (best: PMID {best.pmid}, {best.share:.0%})" if best else " (none found)")
            )


def questions_for_topic(
    topic: Topic,
    papers: Sequence[Paper],
    *,
    pivot: float,
    update_after: int,
    min_trials: int,
    references: Mapping[int, set[int]] | None = None,
    judge: Any = None,
) -> tuple[list[ReviewQuestion], dict[int, Eligibility], list[Paper]]:
    """A goal's questions over `papers` (its scope): the reviews among them (`is_review`), the topic with
    the abbreviations its records define, the questions built from the rest and their coverage by the reviews.
    `judge`: an `evidence.question_judge` judge (an LLM) checking the rules' answers; None: the rules alone.
    Returns (questions, every record's eligibility, the reviews)."""
    reviews = [p for p in papers if is_review(p)]
    topic = topic.with_abbreviations(papers)
    questions, judged = build_questions(topic, papers, judge)
    assess_coverage(questions, reviews, topic, pivot=pivot, update_after=update_after, min_trials=min_trials,
                    references=references, judge=judge)  # fmt: skip
    return questions, judged, reviews


def keep_to_topic(parent_seed: str | None, child_seed: str) -> tuple[str, str]:
    """A spawned goal's seed query kept inside its parent's topic: (seed query, what was done).

    A child query that names every population concept of the parent's (by the parent's own concept words)
    narrows it and is kept; otherwise the parent's query is ANDed in front of it, so the child can only narrow
    the parent's question (a sub-population, a comparator, an outcome), never move to another condition."""
    if not parent_seed or not child_seed:
        return child_seed, ""
    parent = Topic.from_seed_query(parent_seed)
    missing = [c.label for c in parent.population if c.find(child_seed) is None]
    if not missing:
        return child_seed, ""
    return f"({parent_seed}) AND ({child_seed})", f"kept inside the parent's topic (it lacked {', '.join(missing)})"
