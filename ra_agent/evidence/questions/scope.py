"""A handbook's eligibility in its own words: what its prose says about comparators, ages, designs, duration,
outcomes and exclusions, read by rules into the `Scope` a review question follows.

A review team writes its eligibility in a sentence or two ("adults with X; one drug compared head to head with
another, or with placebo for clinical outcomes (mortality, hospitalisation); single-dose studies excluded"). The
rules read clauses (split at ";" and sentence ends) by their cue words:
- a comparison ("compared with", "versus", "head to head", "against", "comparator"): each alternative after the cue
  ("another <the class>", "placebo", "another drug class", "surgery", "different doses") is a kind of comparison the
  question takes (`trials.KINDS`); "for <...> outcomes (a, b)" or "reporting a or b" after an alternative asks the
  trials of that kind to report one of those outcomes (in the title or a sentence past the abstract's opening: an
  opening that sets the scene, "X reduces mortality in heart failure", says what is known, not what was measured;
  the topic's condition says who was treated, "patients after myocardial infarction", unless it is named as an
  event, "the incidence of heart failure"); a trial whose comparator the rules could not name is held to them too;
- an exclusion ("... excluded", "excluding ...", "except ..."): a kind of comparison it names is dropped ("dose
  comparisons excluded"); any other item is a design or population a trial must not be about ("single-dose
  studies", "cluster headache", "stress incontinence alone"), matched in the trial's title and the sentences
  stating its aim or participants;
- who: "adults" (without "children" or "any age") keeps adults only; "children" alone keeps children only;
- how long: "at least N days/weeks/months/years" drops trials whose abstract states a shorter treatment or
  follow-up for its longest period;
- language: "English-language publications" drops a record none of whose languages of publication is English
  (`Paper.language`, PubMed's codes); a record whose language the source did not say (or PubMed gives as
  undetermined) is dropped when its title is in square brackets (PubMed's translation of a title published in
  another language).
Without a comparison clause the question takes every kind of comparison except doses, schedules or formulations of
one agent (`DEFAULT_KINDS`: they ask which dose, not whether the treatment works); a handbook that wants them says
so ("different doses included", "dose comparisons"). Every statement keeps the handbook's words and what the rules
apply, for the dossier; a clause naming eligibility that the rules could not read is listed as not applied.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ra_agent.evidence.classes import PLACEBO, classes_named, lineage
from ra_agent.evidence.questions.model import (
    DOSE_KIND,
    KINDS,
    NON_DRUG_KIND,
    OTHER_CLASS,
    PLACEBO_KIND,
    SAME_CLASS,
    UNNAMED,
    Eligibility,
)
from ra_agent.evidence.questions.topic import Concept, normalise, word_patterns
from ra_agent.evidence.questions.trials import EXCLUSION, NON_DRUG, RANDOMISED_TEXT, SUBJECT_SENTENCE, sentences
from ra_agent.models import ENGLISH, UNDETERMINED_LANGUAGE, Paper

DEFAULT_KINDS = frozenset(k for k in KINDS if k != DOSE_KIND)
COMPARISON = re.compile(r"\b(?:compared|comparisons?|comparing|versus|vs\.?|against|head[- ]to[- ]head|comparators?)\b",
                        re.I)  # fmt: skip
EXCLUDES = re.compile(r"\bexclu(?:ded|ding|des|sion)\b|\bnot (?:eligible|included|accepted)\b|\bexcept\b", re.I)
ANY_COMPARATOR = re.compile(r"\bany (?:comparators?|controls?|comparison|other (?:treatment|intervention)s?)\b", re.I)
DOSE_WORDS = re.compile(r"\bdos(?:e|es|ing)\b|\bformulations?\b|\bschedules?\b|\bregimens?\b|\broutes?\b", re.I)
SAME_WORDS = re.compile(r"\banother\b|\bone another\b|\beach other\b|\bhead[- ]to[- ]head\b|\bwithin (?:the|a|its) class\b"
                        r"|\bsame class\b|\bother members?\b", re.I)  # fmt: skip
OTHER_WORDS = re.compile(r"\b(?:another|other|different|alternative|active)\s+(?:[\w-]+\s+){0,3}?(?:drugs?|class(?:es)?|"
                         r"agents?|medications?|treatments?|therap(?:y|ies)|interventions?|comparators?)\b", re.I)  # fmt: skip
NON_DRUG_WORDS = re.compile(r"\bnon-?(?:drug|pharmacolog\w*)\b|\bpsycholog\w*|\bpsychotherap\w*|\bbehaviou?ral\b", re.I)
OUTCOME_CUE = re.compile(r"\bfor (?:[\w-]+ ){0,4}?(?:outcomes?|adverse events?|harms?|side effects?|safety)\b"
                         r"|\breporting\b|\bthat reports?\b|\bwith outcomes?\b|\bon (?:[\w-]+ ){0,2}?outcomes?\b",
                         re.I)  # fmt: skip
# words that open an outcome item without naming it ("serious gastrointestinal ...", "clinical outcomes")
OUTCOME_FILLER = re.compile(r"^(?:(?:serious|clinical|other|important|major|hard|patient[- ]important|relevant|"
                            r"intermediate)\s+)+", re.I)  # fmt: skip
# Clinical (patient-important) outcomes, by the core outcome domains of COMET's taxonomy (Dodd et al., J Clin
# Epidemiol 2018): death, clinical events, symptoms, function and quality of life, resource use, adverse events.
# A handbook asking for "clinical outcomes" takes a trial reporting any of them, not one reporting only a measurement
# (blood pressure, a biomarker, haemodynamics)
CLINICAL_OUTCOMES = re.compile(
    r"\bmortality\b|\bdeaths?\b|\bdied\b|\bsurvival\b|\bmorbidity\b|\b(?:cardiovascular|cardiac|coronary|clinical"
    r"|vascular|cerebrovascular|thrombotic|thromboembolic|major) events?\b|\bhospitali[sz]\w*|\badmissions?\b"
    r"|\bstrokes?\b(?! (?:volume|work|index|distance))|\binfarctions?\b|\bsymptom\w*|\bquality of life\b"
    r"|\brelapse\w*|\bremission\b|\bhealing\b|\bpain\b"
    r"|\bdisabilit\w*|\bprogression\b|\bdialysis\b|\bamputations?\b|\bfractures?\b|\bexacerbations?\b"
    r"|\brecurrence\w*|\bend[- ]stage\b",
    re.I,
)
# harms count as a clinical outcome when the report is about them (its title), not for a mention in passing
HARMS_TITLE = re.compile(r"\badverse (?:effects?|events?|reactions?)\b|\bside[- ]effects?\b|\bsafety\b|\btoxicit\w*",
                         re.I)  # fmt: skip
# a clause that prefers or illustrates is not eligibility ("prefer comparisons such as PPI vs H2RA")
NOT_ELIGIBILITY = re.compile(r"\bprefer\w*|\bsuch as\b|\be\.g\.|\bfor example\b|`", re.I)
ONLY_OUTCOMES = re.compile(r"\breporting only\b|\bonly (?:[\w-]+ ){0,3}?outcomes?\b", re.I)
ADULTS = re.compile(r"\badults?\b|\baged (?:18|eighteen|16|sixteen) (?:years )?(?:or|and) (?:over|older|above)\b"
                    r"|\b(?:18|eighteen) years (?:or|and) (?:over|older)\b", re.I)  # fmt: skip
CHILDREN = re.compile(r"\bchild(?:ren)?\b|\bpaediatric\b|\bpediatric\b|\binfants?\b|\badolescents?\b", re.I)
ANY_AGE = re.compile(r"\bany age\b|\ball ages\b|\badults and children\b|\bchildren and adults\b", re.I)
NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                "ten": 10, "twelve": 12, "a": 1}  # fmt: skip
WEEKS_PER = {"day": 1 / 7, "week": 1.0, "month": 52.18 / 12, "year": 52.18}
_NUMBER = r"(\d+(?:\.\d+)?|" + "|".join(NUMBER_WORDS) + r")"
MIN_DURATION = re.compile(rf"\b(?:at least|a minimum of|minimum(?: of)?|no (?:less|shorter) than|≥|>=)\s*{_NUMBER}[- ]"
                          r"(day|week|month|year)s?\b", re.I)  # fmt: skip
# durations an abstract states: "for 8 weeks", "a 12-week trial", "over 2 years", "26 weeks of treatment"
DURATION = re.compile(rf"\b{_NUMBER}[- ](day|week|month|year)s?\b", re.I)
ELIGIBILITY_WORDS = re.compile(r"\beligib\w*|\binclu(?:ded|des|ding|sion)\b|\bexclu\w+|\bonly\b", re.I)
# a clause that tells the agent what to do ("run `run_pico` to count eligible trials", "a cluster with enough
# eligible trials ... is the gap this handbook asks for"): it names a tool or ra's clusters, not the review's
# eligibility, so it is no statement a reviewer needs to check the list against
AGENT_INSTRUCTION = re.compile(r"`\w+|\bclusters?\b", re.I)
# words an exclusion item carries that name no condition or design of its own
GENERIC = re.compile(r"\b(?:studies|study|trials?|populations?|patients?|people|participants?|alone|only|the|of|in|with"
                     r"|those|reports?|publications?|data)\b", re.I)  # fmt: skip
AGE_OF_TRIAL_CHILDREN = re.compile(r"\bchild(?:ren|hood)?\b|\bpaediatric\b|\bpediatric\b|\binfants?\b|\bneonat\w*"
                                   r"|\badolescen\w*|\bschool[- ]age\w*", re.I)  # fmt: skip
AGE_OF_TRIAL_ADULTS = re.compile(
    r"\badults?\b|\belderly\b|\bolder (?:people|patients|adults)\b|\bmen\b|\bwomen\b", re.I
)
# a language restriction ("English-language publications", "published in English"), read in the record's languages;
# without them, PubMed encloses in square brackets the English translation of a title published in another language
# (NLM's MEDLINE convention for TI), which is how such a record says it is not in English
ENGLISH_ONLY = re.compile(r"\bEnglish[- ](?:language|only)\b|\b(?:published|written|reported|available) in English\b",
                          re.I)  # fmt: skip
TRANSLATED_TITLE = re.compile(r"^\s*\[.+\]\.?\s*$", re.S)
CHILD_MESH = frozenset(("Child", "Child, Preschool", "Infant", "Infant, Newborn", "Adolescent"))
ADULT_MESH = frozenset(("Adult", "Young Adult", "Middle Aged", "Aged", "Aged, 80 and over"))


@dataclass(frozen=True)
class Statement:
    """One eligibility statement: the handbook's words and what the rules apply ("" when they apply nothing)."""

    words: str
    rule: str

    def line(self) -> str:
        return f"'{self.words}' -> {self.rule or 'not applied by the rules (read it when you check the list)'}"


@dataclass(frozen=True)
class Scope:
    """What the handbook's prose asks of a trial beyond the seed query (module text)."""

    comparators: frozenset[str] = DEFAULT_KINDS
    ages: str = "any"  # "any" | "adults" | "children"
    min_weeks: float | None = None
    outcomes: tuple[str, ...] = ()  # a trial of a kind in `outcome_kinds` must report one of these
    outcome_kinds: frozenset[str] = frozenset()
    excluded: tuple[str, ...] = ()  # conditions or designs a trial must not be about (the handbook's words)
    english_only: bool = False
    statements: tuple[Statement, ...] = field(default=(), compare=False)

    def allows(self, kind: str) -> bool:
        """Whether the question takes trials making this kind of comparison (`trials.KINDS`)."""
        return kind in self.comparators

    def comparators_label(self) -> str:
        """The comparison kinds in words, "any" when every kind but dose is taken (the default)."""
        if self.comparators >= DEFAULT_KINDS:
            return "any" if DOSE_KIND not in self.comparators else "any (doses and schedules included)"
        named = [k for k in KINDS if k in self.comparators and k != UNNAMED]
        return " or ".join(named) or "any"

    def outside(self, paper: Paper, answer: Eligibility, population: Sequence[Concept] = ()) -> str | None:
        """Why an eligible trial is outside the handbook's scope (not the comparison: `allows` decides that per
        question), or None; `population`: the topic's concepts, whose words say who was treated, not what was
        measured (see `population_read`)."""
        title = paper.title or ""
        subject = " ".join([title, *_subject_sentences(paper)])
        for phrase in self.excluded:
            for pattern in word_patterns(phrase):
                if match := re.search(pattern, subject, re.I):
                    return f"about {match.group(0)!r} (the handbook excludes {phrase!r})"
        if self.english_only and (why := _not_english(paper)):
            return f"not in English ({why}; the handbook asks for English-language publications)"
        if self.ages == "adults" and (why := _children_only(paper)):
            return f"in children ({why}; the handbook asks for adults)"
        if self.ages == "children" and not _children_only(paper):
            return "not in children (the handbook asks for children)"
        if self.min_weeks is not None and (weeks := longest_weeks(paper.abstract or "")) is not None:
            if weeks < self.min_weeks:
                return f"lasts {weeks:g} weeks at most (the handbook asks for at least {self.min_weeks:g})"
        # a comparator the rules could not name may be any of the comparisons: held to the outcomes some of them ask
        taken = [k for k in answer.kinds if self.allows(k)]
        if self.outcomes and (not self.outcome_kinds or (taken and set(taken) <= self.outcome_kinds | {UNNAMED})):
            reported, events = population_read(_as_measured(f"{title} {' '.join(_reported(paper))}"), population)
            if not (CLINICAL in self.outcomes and events) and not reports_outcome(reported, self.outcomes, title):
                return f"reports none of {', '.join(self.outcomes)} (the handbook asks for them)"
        return None

    def definition(self) -> str:
        """The eligibility this scope applies, in a canonical line ("" for the default scope): part of a question's
        identity, so that two handbooks stating other eligibility never share a question id."""
        if self == Scope():
            return ""
        outcomes = f"outcomes: {', '.join(self.outcomes)} for {', '.join(sorted(self.outcome_kinds))}"
        parts = [f"comparators: {', '.join(sorted(self.comparators))}", f"ages: {self.ages}",
                 f"weeks: {self.min_weeks}", outcomes, f"excluded: {', '.join(self.excluded)}",
                 f"english: {self.english_only}"]  # fmt: skip
        return "; ".join(parts)

    def lines(self) -> list[str]:
        """The statements as the dossier lists them."""
        return [s.line() for s in self.statements]


def _not_english(paper: Paper) -> str | None:
    """Why a record is not in English: its languages, none of them English; when its languages are unknown, its title
    in square brackets."""
    known = [code for code in paper.language if code != UNDETERMINED_LANGUAGE]
    if known:
        return None if ENGLISH in known else f"language: {', '.join(known)}"
    if TRANSLATED_TITLE.match(paper.title or ""):
        return "its title is in square brackets, NLM's mark of a translated title"
    return None


def _subject_sentences(paper: Paper) -> list[str]:
    out = []
    for i, sentence in enumerate(sentences(paper.abstract)):
        if not EXCLUSION.search(sentence) and (i == 0 or SUBJECT_SENTENCE.search(sentence)):
            out.append(sentence)
    return out[:3]


# an abstract's opening sentences that set the scene ("ACE inhibitors reduce mortality in heart failure.") say what
# is known, not what the trial measured
_BACKGROUND = re.compile(r"\b(?:has|have) (?:\w+ )?(?:been )?(?:shown|reported|suggested|demonstrated|indicated)\b"
                         r"|\bis (?:known|associated)\b"
                         r"|\bare (?:known|associated)\b|\b(?:little|less) is known\b|\bremains? (?:unclear|unknown)\b",
                         re.I)  # fmt: skip


# words that name no outcome a trial measured although an outcome word is in them: a trial's or its group's name
# ("The Survival and Ventricular Enlargement Investigators", "the International Study of Infarct Survival"), when
# patients were enrolled or tested ("within 24 hours of the onset of symptoms", "a symptom-limited exercise test",
# "post-infarction day 4") and who they were ("patients with symptomatic heart failure", "hospitalized for
# suspected infarction", "non-hospitalized patients")
TRIAL_NAME = re.compile(r"\b(?:[A-Z][\w'-]*[ ,]+(?:(?:and|of|in|on|with|for|the|to)\s+)*){0,8}"
                        r"(?:Study|Trial|Investigators|Group|Trialists)\b"
                        r"(?: of (?:(?:the|and|of|in|on)\s+|[A-Z][\w'-]*\s*){1,8})?")  # fmt: skip
NOT_MEASURED = re.compile(
    r"\b(?:the )?onset of (?:the )?(?:symptoms?|pain|infarction|chest pain)\b|\bsymptoms? onset\b"
    r"|\bsymptom-limited\b|\b(?:a)?symptomatic (?=(?:patients|subjects|individuals|men|women|outpatients|mild|moderate"
    r"|severe|chronic|congestive|heart|left|stable|or asymptomatic)\b)|\(?(?:a)?symptomatic\)?(?= patients| or asymptomatic)"
    r"|\b(?:non-?)?hospitali[sz]ed (?=(?:within|for|with|because|patients|male|female|men|women|adults|subjects)\b)"
    r"|\bpost-?infarction\b|\b(?:after|following|since|from) (?:the )?(?:acute |index )?infarction\b",
    re.I,
)


def _as_measured(text: str) -> str:
    """The text with the words that name no outcome it measured left out (TRIAL_NAME, NOT_MEASURED)."""
    return NOT_MEASURED.sub(" ", TRIAL_NAME.sub(" ", text))


# what a class of drugs is known to do, said in the present tense with no figure ("ACE inhibitors reduce mortality
# and morbidity in patients with heart failure"): background, not the trial's result (which has its figures)
_CLAIM = re.compile(r"^(?!.*\d)(?!.*\b(?:we|our|this|the present)\b).*\b(?:reduce|improve|decrease|prolong|prevent"
                    r"|lower|increase)s?\b", re.I)  # fmt: skip


def _reported(paper: Paper) -> list[str]:
    """The abstract's sentences that can say what the trial measured: all but an opening that sets the scene (the
    first sentence, when it states neither the aim, the participants nor a result, or any sentence saying what is
    known)."""
    out = []
    for i, sentence in enumerate(sentences(paper.abstract)):
        opening = i == 0 and not (SUBJECT_SENTENCE.search(sentence) or RANDOMISED_TEXT.search(sentence)
                                  or re.search(r"\d", sentence))  # fmt: skip
        if not opening and not _BACKGROUND.search(sentence) and not _CLAIM.search(sentence):
            out.append(sentence)
    return out


def _children_only(paper: Paper) -> str | None:
    """Why a trial is in children only: MeSH age groups of children and none of adults, or its title (and aim)
    naming children and no adults."""
    mesh = set(paper.mesh)
    if mesh & CHILD_MESH and not mesh & ADULT_MESH:
        return f"MeSH {sorted(mesh & CHILD_MESH)[0]}"
    subject = " ".join([paper.title or "", *_subject_sentences(paper)[:1]])
    if (match := AGE_OF_TRIAL_CHILDREN.search(subject)) and not AGE_OF_TRIAL_ADULTS.search(subject):
        return f"it says {match.group(0)!r}"
    return None


def _number(text: str) -> float:
    return float(NUMBER_WORDS.get(text.lower(), text) if not text[0].isdigit() else text)


def longest_weeks(abstract: str) -> float | None:
    """The longest treatment or follow-up an abstract states, in weeks (None when it states none)."""
    weeks = [_number(m.group(1)) * WEEKS_PER[m.group(2).lower()] for m in DURATION.finditer(abstract)]
    return round(max(weeks), 1) if weeks else None


# a genus abbreviated to its capital ("*H. pylori*", "E. coli") ends no sentence
GENUS = re.compile(r"(?<![\w.])(\*?[A-Z])\.(?=\s+\*?[a-z])")


def _clauses(prose: str) -> list[str]:
    """The prose's clauses (sentences split at ";" and dashes), headings and bullets' marks left out."""
    text = " ".join(
        line.strip().lstrip("-*").strip() for line in prose.splitlines() if not line.lstrip().startswith("#")
    )
    parts = [c.strip(" ,").replace("\0", ".") for s in sentences(GENUS.sub("\\1\0", text))
             for c in re.split(r";|\s+[—–]\s+", s)]  # fmt: skip
    return [" ".join(p.split()) for p in parts if p.strip(" ,")]


CLINICAL = "clinical outcomes"  # an outcome list item: any of CLINICAL_OUTCOMES
# words before a condition that make it an event the trial counts ("recurrent myocardial infarction", "the risk of
# stroke", "hospitalised for heart failure"), not who the participants are ("patients after myocardial infarction")
EVENT_BEFORE = re.compile(r"(?:\b(?:incidence|rates?|risk|occurrence|development|prevention|episodes?|cases?) of "
                          r"(?:(?:new|recurrent|worsening|chronic|acute|overt|symptomatic|fatal|non-?fatal)[- ])?"
                          r"|\b(?:new|recurrent|worsening|progressive|fatal|non-?fatal|developing|developed"
                          r"|hospitali[sz]\w* for)[- ]|\bre-)$", re.I)  # fmt: skip


def population_read(text: str, population: Sequence[Concept]) -> tuple[str, list[str]]:
    """(The text, normalised, with the population's words left out where they say who was treated; the population's
    conditions it counts as events). A trial after myocardial infarction that measured only infarct size reports no
    infarction; "re-infarction", "the incidence of heart failure" or "the risk of stroke" are clinical events the
    trial counts (EVENT_BEFORE)."""
    plain, events = normalise(text), []
    for concept in population:
        kept, last = [], 0
        for match in concept.regex.finditer(plain):
            if EVENT_BEFORE.search(plain[max(0, match.start() - 40) : match.start()]):
                events.append(match.group(0))
            else:
                kept += [plain[last : match.start()], " "]
                last = match.end()
        plain = "".join([*kept, plain[last:]])
    return plain, events


def reports_outcome(text: str, outcomes: tuple[str, ...], title: str = "") -> bool:
    """Whether a title and abstract report one of the outcomes (each item's words in order, any ending, its opening
    fillers such as "serious" left out; CLINICAL: any clinical outcome)."""
    for item in outcomes:
        if item == CLINICAL:
            if CLINICAL_OUTCOMES.search(text) or HARMS_TITLE.search(title):
                return True
            continue
        bare = OUTCOME_FILLER.sub("", item).strip()
        if bare and any(re.search(p, normalise(text)) for p in word_patterns(bare)):
            return True
    return False


def _kinds_of(segment: str, intervention: tuple[str, ...]) -> set[str]:
    """The kinds of comparison one alternative names ("another ACE inhibitor", "placebo", "another drug class")."""
    kinds: set[str] = set()
    if ANY_COMPARATOR.search(segment):
        return set(KINDS)
    if PLACEBO.search(segment) or re.search(r"\bsham\b", segment, re.I):
        kinds.add(PLACEBO_KIND)
    if re.search(r"\banother (?:one )?(?:of|in|from|within) (?:the|its|this) (?:same )?class\b|\bsame class\b", segment,
                 re.I):  # fmt: skip
        return kinds | {SAME_CLASS}
    named = classes_named(segment)
    own = [c for c in named if any(i in lineage(c) or c in lineage(i) for i in intervention)]
    if own and SAME_WORDS.search(segment):
        kinds.add(SAME_CLASS)
    if [c for c in named if c not in own]:
        kinds.add(OTHER_CLASS)
    if OTHER_WORDS.search(segment):
        kinds.add(OTHER_CLASS)
        if re.search(r"\btreatments?\b|\btherap(?:y|ies)\b|\binterventions?\b", segment, re.I):
            kinds.add(NON_DRUG_KIND)
    elif not kinds and SAME_WORDS.search(segment):
        kinds.add(SAME_CLASS)
    if NON_DRUG_WORDS.search(segment) or any(p.search(segment) for _, p in NON_DRUG):
        kinds.add(NON_DRUG_KIND)
    if DOSE_WORDS.search(segment) and not re.search(r"\bany dose\b", segment, re.I):
        kinds.add(DOSE_KIND)
    return kinds


def _outcomes_in(text: str) -> tuple[str, ...]:
    """Outcome words a clause asks for: the list in parentheses after "outcomes", else the words after
    "reporting"/"for" up to the clause's end."""
    inside = re.search(r"outcomes?\s*\(([^()]{3,200})\)", text, re.I)
    words = inside.group(1) if inside else ""
    bare = re.sub(r"\([^()]*\)", " ", text)  # a parenthesis qualifies; it lists no outcome of its own
    if not words and (after := re.search(r"\b(?:reporting|that reports?|for)\s+(.{3,120})$", bare, re.I)):
        words = re.sub(r"\boutcomes?\b", "", after.group(1), flags=re.I)
    items = [w.strip(" .") for w in re.split(r",|\bor\b|\band\b", words) if w.strip(" .")]
    named = tuple(i for i in items if len(i) >= 3 and not re.fullmatch(r"(?:clinical|other|important)\s*", i))
    clinical = re.search(r"\b(?:clinical|patient[- ]important|hard) (?:[\w-]+ )?outcomes?\b", text, re.I)
    return (*named, CLINICAL) if clinical else named


def _comparison(clause: str, intervention: tuple[str, ...]) -> tuple[set[str], set[str], tuple[str, ...]]:
    """(kinds taken, kinds whose trials must report the outcomes, the outcomes) of a comparison clause."""
    cue = COMPARISON.search(clause)
    assert cue is not None
    before, after = clause[: cue.start()], clause[cue.start() :]
    kinds: set[str] = set()
    if DOSE_WORDS.search(before) and not re.search(r"\bany dose\b", before, re.I):
        kinds.add(DOSE_KIND)  # "one drug or formulation compared head to head with another"
    if re.search(r"head[- ]to[- ]head", after, re.I):
        kinds.add(SAME_CLASS)
    for inside in re.findall(r"\(([^()]*)\)", after):  # "(different formulations included)"
        if not EXCLUDES.search(inside) and DOSE_WORDS.search(inside) and re.search(r"includ|accept", inside, re.I):
            kinds.add(DOSE_KIND)
    outcome_kinds: set[str] = set()
    outcomes: tuple[str, ...] = ()
    for group in re.split(r",\s*or\s+", re.sub(r"\([^()]*\)", lambda m: m.group(0).replace(",", ";"), after)):
        group_kinds = set()
        for segment in re.split(r"\s+or\s+|,\s*", OUTCOME_CUE.split(group)[0]):
            group_kinds |= _kinds_of(segment, intervention)
        kinds |= group_kinds
        if OUTCOME_CUE.search(group):
            outcomes = _outcomes_in(group.replace(";", ","))
            outcome_kinds |= group_kinds
    return kinds, outcome_kinds, outcomes


def _excluded_items(clause: str) -> list[str]:
    """The items an exclusion clause names: "prophylaxis and cluster-headache studies excluded" -> prophylaxis,
    cluster-headache; "excluding children" -> children."""
    cue = EXCLUDES.search(clause)
    assert cue is not None
    text = clause[: cue.start()] if cue.group(0).lower().startswith("exclud") and cue.start() > 0 and not re.search(
        r"\bexcluding\b", cue.group(0), re.I) else clause[cue.end() :]  # fmt: skip
    text = re.sub(r"\b(?:were|are|is|was|be)\s*$", "", text.strip(), flags=re.I)
    text = re.sub(r"\([^()]*\)", " ", text)  # "(unless both arms get them)": a condition on the item, not an item
    items = [GENERIC.sub(" ", re.sub(r"\bwith\b", " ", i)) for i in re.split(r",|\band\b|\bor\b", text)]
    items = [" ".join(i.split()) for i in items]
    return [i.replace("-", " ") for i in items if len(i) >= 4 or (len(i) >= 2 and i.isupper())]  # "HIV" too


def read_scope(prose: str, intervention: tuple[str, ...] = ()) -> Scope:
    """The Scope a handbook's prose states (module text); `intervention`: the topic's intervention classes (so that
    "another ACE inhibitor" is a comparison within the class)."""
    comparators: set[str] | None = None
    dropped: set[str] = set()
    outcome_kinds: set[str] = set()
    outcomes: tuple[str, ...] = ()
    excluded: list[str] = []
    ages, min_weeks, statements, english_only = "any", None, [], False
    adults = children = any_age = False
    for clause in _clauses(prose):
        rules = []
        if EXCLUDES.search(clause):
            for item in _excluded_items(clause):
                if ONLY_OUTCOMES.search(clause) and outcomes:
                    outcome_kinds = set()  # "trials reporting only blood pressure excluded": every kind reports them
                    rules.append("every trial must report one of the outcomes named")
                    break
                kinds = _kinds_of(item, intervention) & {PLACEBO_KIND}
                if re.search(r"\bcompar\w*|\bdifferent\b|\branging\b|\bfinding\b|\bschedules?\b|\bformulations?\b"
                             r"|\bregimens?\b", item, re.I) and DOSE_WORDS.search(item):  # fmt: skip
                    kinds.add(DOSE_KIND)  # "dose comparisons excluded" (not "single-dose studies": a design)
                if kinds:
                    dropped |= kinds
                    rules.append(f"comparisons dropped: {', '.join(sorted(kinds))}")
                elif CHILDREN.fullmatch(item.strip()):
                    adults = True
                    rules.append("adults only")
                else:
                    excluded.append(item)
                    rules.append(f"a trial about {item!r} is out")
        elif COMPARISON.search(clause) and not NOT_ELIGIBILITY.search(clause):
            kinds, asked_kinds, named = _comparison(clause, intervention)
            if kinds:
                comparators = (comparators or set()) | kinds
                rules.append(f"comparisons taken: {', '.join(k for k in KINDS if k in kinds)}")
            if named:
                outcomes, outcome_kinds = named, outcome_kinds | asked_kinds
                rules.append(f"trials ({', '.join(k for k in KINDS if k in asked_kinds) or 'all'}) must report one "
                             f"of: {', '.join(named)}")  # fmt: skip
        if ANY_AGE.search(clause) or (
            ADULTS.search(clause) and CHILDREN.search(clause) and not EXCLUDES.search(clause)
        ):
            any_age = True
            rules.append("any age")
        elif ADULTS.search(clause) and not CHILDREN.search(clause):
            adults = True
            rules.append("adults only")
        elif CHILDREN.search(clause) and not ADULTS.search(clause) and not EXCLUDES.search(clause):
            children = True
            rules.append("children only")
        if match := MIN_DURATION.search(clause):
            min_weeks = round(_number(match.group(1)) * WEEKS_PER[match.group(2).lower()], 2)
            rules.append(f"at least {min_weeks:g} weeks of treatment or follow-up")
        if ENGLISH_ONLY.search(clause):
            english_only = True
            rules.append("English-language publications only")
        if rules or (ELIGIBILITY_WORDS.search(clause) and not AGENT_INSTRUCTION.search(clause)):
            statements.append(Statement(clause, "; ".join(dict.fromkeys(rules))))
    if not any_age:
        ages = "adults" if adults and not children else "children" if children and not adults else "any"
    taken = (frozenset(comparators) | {UNNAMED}) if comparators else DEFAULT_KINDS
    return Scope(taken - dropped, ages, min_weeks, outcomes, frozenset(outcome_kinds), tuple(dict.fromkeys(excluded)),
                 english_only, tuple(statements))  # fmt: skip
