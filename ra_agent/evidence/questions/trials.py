"""Trial eligibility for a review question: is a record a randomised trial a reviewer would accept for the
topic's treatment question, and why (rules over title, abstract, MeSH headings and publication types)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ra_agent.evidence.classes import PLACEBO, Agent, agents_in, lineage
from ra_agent.evidence.questions.model import Eligibility
from ra_agent.evidence.questions.reviews import cue_reason, is_review
from ra_agent.evidence.questions.topic import PLACEBO_ARM, Concept, Topic, is_abbreviation, normalise
from ra_agent.models import Paper

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
# An agent used for another purpose than treating the participant is another intervention: part of a device (a
# lock, flush, coating or impregnation of a catheter, stent or dressing) or a diagnostic test.
DEVICE_USE = re.compile(r"\b(?:locks?|locking|flush\w*|coated|coating|bonded|impregnated|eluting|\w+i[sz]ed saline)\b",
                        re.I)  # fmt: skip
DIAGNOSTIC_USE = re.compile(r"\bdiagnos\w*", re.I)
PROTOCOL = re.compile(r"\brationale and design\b|\bstudy protocol\b|\bprotocol for a\b|\bdesign of (?:a|the)\b", re.I)
# The sentences of an abstract that say who the trial is about: its aim, and those that randomise or enrol.
SUBJECT_SENTENCE = re.compile(
    r"\b(?:aims?|objectives?|purpose|goal)\b|^\s*to (?:assess|evaluate|determine|compare|investigate|examine|test)\b"
    r"|\bwe (?:studied|assessed|evaluated|compared|investigated|examined|tested)\b|\b(?:enrolled|included|recruited)\b"
    r"|\bpatients? (?:with|who|undergoing|receiving)\b|\bpatients? were\b",
    re.I,
)
# Words that say who or how, not which condition ("patients with X", "treatment and X")
GENERIC = frozenset(
    "patients patient people persons subjects participants adults children infants adolescents women men elderly "
    "treatment therapy management prevention prophylaxis diagnosis healing maintenance relief symptoms symptom "
    "efficacy safety effect effects mild moderate severe chronic acute long-term short-term primary secondary "
    "outpatients inpatients population those individuals cases controls volunteers".split()
)
# a treatment every participant gets ("patients receiving chemotherapy were randomised") is not a comparator
BACKGROUND_TREATMENT = re.compile(r"\b(?:receiving|undergoing|during|scheduled for|treated with|requiring)\s+(?:[\w-]+\s+){0,3}",
                                  re.I)  # fmt: skip
INDUCED = re.compile(r"([\w-]+)[- ]induced\b", re.I)  # "chemotherapy-induced": the cause of the condition
_COMPARE = re.compile(r"\bvs\.?\b|\bversus\b|\bcompared (?:with|to)\b|\bor placebo\b|\breceived\b|\bassigned\b", re.I)


def randomised(paper: Paper) -> str | None:
    """Why a record reports a randomised trial, or None."""
    return cue_reason(paper, RANDOMISED_TYPES, RANDOMISED_TEXT, RANDOMISED_MESH)


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.;?!])\s+", text or "") if s.strip()]


def tested_agents(paper: Paper, topic: Topic) -> list[Agent]:
    """Agents of the topic's classes that the record tests: named in its title (in the first arm when the title
    compares "A versus B"), else in an abstract sentence that randomises or assigns."""
    title = paper.title or ""
    first_arm = re.split(r"\s+(?:versus|vs\.?|compared (?:with|to))\s+", title, maxsplit=1, flags=re.I)[0]
    randomising = [s for s in sentences(paper.abstract) if RANDOMISED_TEXT.search(s)]
    out = []
    for agent in agents_in(f"{title} {paper.abstract}"):
        if not any(c in lineage(agent.cls) for c in topic.intervention):
            continue
        word = re.compile(rf"\b{re.escape(agent.word)}\b", re.I)
        if word.search(first_arm) or (not word.search(title) and any(word.search(s) for s in randomising)):
            out.append(agent)
    return out


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


def _used_as(paper: Paper, agents: Sequence[Agent], topic: Topic) -> str | None:
    """Another purpose of the tested agents than treating the participant, unless the question names it: part of a
    device (every mention next to lock/flush/coating words, or the title says so), or a diagnostic test (title)."""
    asked = topic.seed_query or ""
    text = f"{paper.title} {paper.abstract}"
    if not DEVICE_USE.search(asked):
        for agent in agents:
            near = [text[max(0, m.start() - 40) : m.end() + 40] for m in re.finditer(rf"\b{re.escape(agent.word)}\b",
                                                                                     text, re.I)]  # fmt: skip
            if DEVICE_USE.search(paper.title or "") or (near and all(DEVICE_USE.search(n) for n in near)):
                return f"{agent.word} used as part of a device (lock, flush, coating), not as a treatment"
    match = DIAGNOSTIC_USE.search(paper.title or "") or re.search(
        rf"\b(?:{'|'.join(re.escape(a.word) for a in agents)}) test\b", paper.title or "", re.I
    )
    if match and not DIAGNOSTIC_USE.search(asked):
        return f"{agents[0].word} used as a diagnostic test (title says {match.group(0)!r}), not as a treatment"
    return None


def _subject_condition(paper: Paper, concept: Concept, topic: Topic) -> tuple[str | None, str]:
    """Where the record says the concept as its subject: its title, its MeSH headings, or an abstract sentence
    that opens it or states its aim or its participants (a mention in passing elsewhere does not count): (words,
    where)."""
    if words := concept.find(paper.title or ""):
        return words, paper.title or ""
    if words := concept.find("", paper.mesh):
        return words, ""
    for i, sentence in enumerate(sentences(paper.abstract)):
        if i == 0 or SUBJECT_SENTENCE.search(sentence) or RANDOMISED_TEXT.search(sentence):
            if words := concept.find(sentence):
                return words, sentence
    return None, ""


def _other_condition(where: str, words: str, topic: Topic) -> str | None:
    """Another condition the record puts first, with the concept as its companion ("asthma and gastro-oesophageal
    reflux", "cough with reflux"): the word before "and/with" is neither generic, nor a topic concept, nor a drug."""
    text = normalise(where).replace("-", "")
    at = text.find(normalise(words).replace("-", ""))
    if at <= 0:
        return None
    before = re.search(r"(?:([a-z][\w()-]*)\s+)?([a-z][\w()-]*)\s+(?:and|with)\s+(?:[\w()-]+\s+){0,2}$", text[:at])
    if before is None:
        return None
    for word in (before.group(2), before.group(1)):
        if not word or len(word) < 4 or agents_in(word) or any(c.find(word) for c in topic.population):
            return None
        if word not in GENERIC:
            return word
    return None


TITLE_PEOPLE = re.compile(r"(?:^|\b(?:in|among|for|of)\s+)(?:[\w-]+\s+){0,2}?(?:patients|people|persons|subjects|"
                          r"children|adults|women|men|infants|adolescents|individuals)\s+with\s+([^.:;,()]+)",
                          re.I)  # fmt: skip


def _title_population(title: str, topic: Topic) -> str | None:
    """The people a title says the trial is in ("in patients with duodenal ulcer") when that phrase names none of
    the topic's concepts and no treatment, else None (used when the record names the concept only in its
    abstract: the title's population is then another condition)."""
    match = TITLE_PEOPLE.search(title)
    if match is None or agents_in(match.group(1)) or any(c.find(match.group(1)) for c in topic.population):
        return None
    return match.group(0).strip()


def comparator_of(paper: Paper, agents: Sequence[Agent], topic: Topic | None = None) -> str:
    """The comparator a trial tests its agents against: the class of another agent named in the title's second
    arm or in a sentence that randomises or compares (not the tested class, not a word of the topic's population
    such as "chemotherapy" for cancer, not a class the record names as the cause of the condition: cyclophosphamide
    in a trial of "chemotherapy-induced" injury), "another <class>" (two agents of one class, head to head),
    "placebo or no treatment", else "dose, schedule or unclear comparator"."""
    text = f"{paper.title} {paper.abstract}"
    tested = agents[0].cls if agents else ""
    arms = re.split(r"\s+(?:versus|vs\.?|compared (?:with|to)|or)\s+", paper.title or "", maxsplit=1, flags=re.I)[1:]
    chosen = [BACKGROUND_TREATMENT.sub(" ", s) for s in sentences(paper.abstract)
              if RANDOMISED_TEXT.search(s) or _COMPARE.search(s)]  # fmt: skip
    population = topic.population if topic else ()
    causes = {a.cls for m in INDUCED.finditer(text) for a in agents_in(m.group(1))}
    others = [a for a in agents_in(" ".join([*arms, *chosen])) if not any(c.find(a.word) for c in population)
              and a.cls != tested and tested not in lineage(a.cls) and a.cls not in lineage(tested)
              and not causes & set(lineage(a.cls))]  # fmt: skip
    if others:
        return others[0].cls
    if len({a.word for a in agents if a.cls == tested and not is_abbreviation(a.word.upper())}) >= 2:
        return f"another {tested}"
    if PLACEBO.search(text):
        return PLACEBO_ARM
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
    found = []
    for concept in topic.population:
        words, where = _subject_condition(paper, concept, topic)
        if words is None:
            anywhere = concept.find(f"{paper.title} {paper.abstract}")
            return Eligibility(pmid, False, f"another condition or population (no {concept.label!r}"
                                            + (f"; {anywhere!r} only in passing)" if anywhere else ")"))  # fmt: skip
        if other := _other_condition(where, words, topic):
            return Eligibility(pmid, False, f"another condition first ({other!r} with {concept.label!r})")
        if where not in ("", paper.title) and (people := _title_population(paper.title or "", topic)):
            return Eligibility(pmid, False, f"another population (title: {people!r})")
        found.append(f"{concept.label} ({words!r})")
    agents = tested_agents(paper, topic)
    title_agents = agents_in(paper.title or "")
    if title_agents and not any(a in agents for a in title_agents):
        other = title_agents[0]
        return Eligibility(pmid, False, f"tests {other.word} ({other.cls}), not {' or '.join(topic.intervention)}")
    if not agents:
        return Eligibility(pmid, False, f"does not test {' or '.join(topic.intervention)}")
    if why := _used_as(paper, agents, topic):
        return Eligibility(pmid, False, why)
    comparator = comparator_of(paper, agents, topic)
    if topic.comparator and not any(comparator == c or c in lineage(comparator) for c in topic.comparator):
        return Eligibility(pmid, False, f"compares with {comparator}, not {' or '.join(topic.comparator)}")
    tested = ", ".join(f"{a.word} ({a.cls})" for a in agents[:3])
    reason = f"randomised ({design}); in humans with {'; '.join(found)}; tests {tested}; vs {comparator}"
    return Eligibility(pmid, True, reason, tuple(agents), comparator)
