"""Trial eligibility for a review question: is a record a randomised trial a reviewer would accept for the
topic's treatment question, and why (rules over title, abstract, MeSH headings and publication types)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ra_agent.evidence.classes import PLACEBO, Agent, agents_in, classes_named, lineage
from ra_agent.evidence.questions import mesh
from ra_agent.evidence.questions.model import (
    DOSE_OR_SCHEDULE,
    NOT_NAMED,
    PLACEBO_ARM,
    Eligibility,
    compares_with,
)
from ra_agent.evidence.questions.not_trials import not_a_trial_report
from ra_agent.evidence.questions.reviews import as_read, cue_reason, is_review
from ra_agent.evidence.questions.topic import Concept, Topic, normalise
from ra_agent.models import Paper

RANDOMISED_TYPES = ("Randomized Controlled Trial", "Controlled Clinical Trial", "Pragmatic Clinical Trial")
RANDOMISED_MESH = ("Random Allocation", "Double-Blind Method", "Single-Blind Method")
# Trial-report wording (one trial randomised its participants: "a multicentre, randomized, double-blind,
# parallel-group design"); "randomized trials" in the plural is how reviews and commentaries speak, so it is not a
# cue, unless the sentence reports the trials' own participants ("In 2 randomized, double-blind trials of 901
# patients").
RANDOMISED_TEXT = re.compile(
    r"\b(?:were|was|are|is|been) (?:\w+ )?randomi[sz]ed\b|\brandomly (?:assigned|allocated|divided|selected)\b"
    r"|\brandomi[sz]ed (?:to|into|in a|between)\b|(?<!non-)\brandomi[sz]ation\b"
    r"|\b(?:a|an|this|our|the present|prospective|open|double-blind|multicent\w+)[, ]+(?:[\w-]+[, ]+){0,4}?"
    r"randomi[sz]ed\b(?:[, ]+[\w-]+){0,6}?[, ]+(?:trial|study|design)\b"
    r"|\bin (?:two|three|four|[2-9]) (?:[\w-]+[, ]+){0,2}?randomi[sz]ed\b(?:[, ]+[\w-]+){0,6}?[, ]+(?:trials|studies)"
    r" (?:of|in|with|involving) (?:a total of )?\d+",
    re.I,
)
# A controlled comparison that says so without the word "randomised": placebo-controlled, "A or placebo was given",
# a double-blind parallel-group or cross-over comparison (the design a randomised trial's abstract describes)
CONTROLLED_TEXT = re.compile(
    r"\bplacebo[- ]controlled\b|\b(?:or|versus|vs\.?) (?:matching |identical )?placebo\b"
    r"|\bdouble[- ]blind\w*[, ]+(?:[\w-]+[, ]+){0,3}?(?:parallel[- ]group|cross-?over|comparative)?[, ]*"
    r"(?:comparison|trial|study)\b",
    re.I,
)
NOT_RANDOMISED = re.compile(r"\bnon-?randomi[sz]ed\b|\bretrospective\w*|\bcase series\b|\bcohort study\b", re.I)
ANIMAL_TEXT = re.compile(r"\b(?:rats?|mice|murine|rabbits?|dogs?|canine|pigs?|porcine|sheep|ovine|primates?|"
                         r"in vitro|ex vivo|cell lines?)\b", re.I)  # fmt: skip
HEALTHY = re.compile(r"\bhealthy (?:volunteers?|subjects?|men|women|adults?|participants?)\b", re.I)
MECHANISM = re.compile(r"\bpharmacokinetic\w*|\bpharmacodynamic\w*|\bbioavailab\w*|\bbioequival\w*|\bmechanism\w*\b"
                       r"|\bplasma (?:levels?|concentrations?)\b", re.I)  # fmt: skip
# A physiological measure as a title's endpoint (acidity, pH) with no clinical outcome beside it: a pharmacodynamic
# study ("Lansoprazole versus omeprazole: influence on meal-stimulated gastric acid secretion")
PHYSIOLOGY = re.compile(r"\b(?:intra)?(?:gastric|oesophageal|esophageal) (?:pH|acid(?:ity)? (?:reduction|exposure|"
                        r"secretion))\b|\bacid (?:secretion|output)\b"
                        # the circulation's and the nervous system's measures: what a physiology study records
                        r"|\bha?emodynamic\w*|\bheart rate variability\b|\bbaroreflex\w*|\brepolari[sz]ation\b"
                        r"|\bQT (?:interval|variability|dispersion)\b|\bblood flow\b|\bperfusion\b|\bmicrocirculat\w*"
                        r"|\bvasodilat(?:ion|ation)\b|\bvasodilator (?:reserve|response|capacity)\b"
                        r"|\bvascular (?:reactivity|resistance|function)\b|\bendothelial function\b"
                        r"|\b(?:plasma|serum) (?:[\w-]+ ){1,2}(?:levels?|concentrations?)\b|\bevoked potentials?\b"
                        r"|\bcontingent negative variation\b|\bmuscle activity\b|\bperipheral arteries\b",
                        re.I)  # fmt: skip
CLINICAL_OUTCOME = re.compile(r"\bheal\w*|\bsymptom\w*|\brelapse\w*|\brecurren\w*|\boutcomes?\b|\bremission\b"
                              r"|\bmortality\b|\bsurvival\b|\btreatment of\b|\bmanagement of\b", re.I)  # fmt: skip
# An agent used for another purpose than treating the participant is another intervention: part of a device (a
# lock, flush, coating or impregnation of a catheter, stent or dressing) or a diagnostic test.
DEVICE_USE = re.compile(r"\b(?:locks?|locking|flush\w*|coated|coating|bonded|impregnated|eluting|\w+i[sz]ed saline)\b",
                        re.I)  # fmt: skip
DIAGNOSTIC_USE = re.compile(r"\bdiagnos\w*", re.I)
PROTOCOL = re.compile(r"\brationale,? (?:and )?design\b|\bstudy design\b|\bdesign,? and organi[sz]ation\b"
                      r"|\bstudy protocol\b|\bprotocol for a\b|\bdesign of (?:a|the)\b|\b(?:trial|study) protocol\b"
                      r"|\bprotocol of (?:a|the)\b", re.I)  # fmt: skip
# A sentence stating who was left out ("patients with esophagitis were excluded") says nothing of who was in
EXCLUSION = re.compile(r"\bexclu(?:ded|ding|sion)\b|\bineligible\b|\bnot (?:eligible|included)\b", re.I)
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
    "outpatients inpatients population those individuals cases controls volunteers signs older younger aged old "
    "years".split()
)
# a treatment every participant gets ("patients receiving chemotherapy were randomised") is not a comparator
BACKGROUND_TREATMENT = re.compile(r"\b(?:receiving|undergoing|during|scheduled for|planned|treated with|requiring|after|following"
                                  r"|in addition to|on top of|on (?:background|concomitant|stable)|already on|taking"
                                  r"|(?:patients|people|subjects|participants|those) on)\s+(?:[\w-]+\s+){0,3}",
                                  re.I)  # fmt: skip
# a title's words for a treatment its participants already take, that the trial adds to or replaces: "felodipine
# versus placebo in angina inadequately controlled with metoprolol", "amlodipine as additional treatment to
# atenolol", "the addition of amlodipine to atenolol", "nifedipine in angina refractory to beta-blockers" test the
# first named agent; the second is every participant's background (up to three words after the cue)
ALREADY_TAKEN = re.compile(r"(?:\b(?:inadequately|insufficiently|poorly|not) (?:controlled|responding) (?:on|by|with)"
                           r"|\b(?:refractory|resistant|unresponsive|(?:partially|poorly) responsive) to"
                           r"|\bdespite(?: adequate| maximal| optimal)?|\badded to|\baugmentation of|\baugmenting"
                           r"|\badjunct(?:ive)? (?:(?:treatment|therapy) )?to"
                           r"|\b(?:as )?(?:an )?add-on to|\badditional (?:[\w-]+ ){0,2}?(?:treatment|therapy|drug) to"
                           r"|(?P<added>\b(?:addition|adding|add-on) of [\w-]+(?: [\w-]+)? )to)(?:\s+[\w-]+){1,3}",
                           re.I)  # fmt: skip
# the same, named before the words that say so: "in olanzapine-treated outpatients", "clozapine and adjunctive
# glycine"
TREATED_BEFORE = re.compile(r"\b[\w-]+-treated\b", re.I)
ADJUNCT_AFTER = re.compile(r"\b[\w-]+\s+(?:and|with|plus)\s+adjunct(?:ive)?\b", re.I)
# an add-on design: "A plus B versus A alone" (or "A combined with B vs. A") tests B (A is in both arms)
ADD_ON = re.compile(r"\b([\w-]+)\s+(?:plus|and|\+|with|combined with|in combination with|added to)\s+([\w-]+)\s+"
                    r"(?:versus|vs\.?|compared (?:with|to))\s+([\w-]+)(?:\s+(?:alone|monotherapy|only))?\b",
                    re.I)  # fmt: skip
# an allocation sentence names each arm with its size: "pantoprazole 20 mg (n=203) or 40 mg (n=193)"
ARM_SIZE = re.compile(r"\(\s*n\s*=\s*\d+\s*\)", re.I)
# a title that says it compares the agents it names ("a randomized blinded comparison of omeprazole and ranitidine")
TITLE_COMPARISON = re.compile(r"\bcompar(?:ison|ing|ative)\b", re.I)
INDUCED = re.compile(r"([\w-]+)[- ]induced\b", re.I)  # "chemotherapy-induced": the cause of the condition
_COMPARE = re.compile(r"\bvs\.?\b|\bversus\b|\bcompared (?:with|to)\b|\bor placebo\b|\breceived\b|\bassigned\b"
                      r"|^\s*(?:to compare|we compared)\b|\b(?:aim|objective|purpose)\w* (?:[\w-]+ ){0,4}?to compare\b",
                      re.I)  # fmt: skip


def randomised(paper: Paper) -> str | None:
    """Why a record reports a randomised (or placebo-controlled, double-blind) trial, or None."""
    return cue_reason(paper, RANDOMISED_TYPES, RANDOMISED_TEXT, RANDOMISED_MESH) or cue_reason(
        paper, (), CONTROLLED_TEXT
    )


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.;?!])\s+", text or "") if s.strip()]


# patients described by a drug they have or have not had ("triptan-naive", "triptan naive patients", "PPI-refractory"):
# who was randomised, not what was tested
PATIENTS_BY_DRUG = re.compile(r"\b[\w-]+[- ](?:na[iï]ve|non-?responsive|non-?responders?|refractory|resistant|intolerant"
                              r"|experienced)\b", re.I)  # fmt: skip


def _unless_arms(match: re.Match[str]) -> str:
    """A background cue's words left out of a title (an add-on's tested agent kept), unless they name alternatives
    ("patients treated with olanzapine or haloperidol", "after treatment with risperidone versus haloperidol"): those
    are the trial's arms, not a treatment every participant takes."""
    window = match.string[match.start() : match.end() + 40]
    words = {a.word.lower() for a in agents_in(window)}
    if len(words) >= 2 and re.search(r"\b(?:or|versus|vs\.?)\s", window, re.I):
        return match.group(0)
    return f" {match.groupdict().get('added') or ''} "


def tested_agents(paper: Paper, topic: Topic) -> list[Agent]:
    """Agents of the topic's classes that the record tests: named in its title (in the first arm when the title
    compares "A versus B"), else in an abstract sentence that randomises or assigns, unless every mention there is
    "<agent> alone" (the arm without the addition the trial tests: "an eradication or omeprazole-alone regime")."""
    title = paper.title or ""
    first_arm = re.split(r"\s+(?:versus|vs\.?|compared (?:with|to))\s+", title, maxsplit=1, flags=re.I)[0]
    if not any(any(c in lineage(a.cls) for c in topic.intervention) for a in agents_in(first_arm)):
        first_arm = title  # "once daily controlled versus immediate release oxybutynin": one agent, two forms
    # a treatment every participant gets ("heart failure treated with captopril") or already takes ("refractory to
    # beta-blockers") is not the one a title tests, as long as the title still names one without it
    title_tested = first_arm
    # what a title adds to or gives despite a treatment is what it tests, in the class table or not ("D-serine added
    # to clozapine", "glycine augmentation of clozapine", "clozapine and adjunctive glycine"): those cues need no
    # agent of the table left
    for background, adds in ((BACKGROUND_TREATMENT, False), (TREATED_BEFORE, False), (ALREADY_TAKEN, True),
                             (ADJUNCT_AFTER, True)):  # fmt: skip
        kept = background.sub(_unless_arms, title_tested)
        if agents_in(kept) or (adds and kept != title_tested and kept.strip()):
            title_tested = kept
    randomising = [PATIENTS_BY_DRUG.sub(" ", s) for s in sentences(paper.abstract) if RANDOMISED_TEXT.search(s)]
    added = [ADD_ON.search(t) for t in (title, *randomising)]
    out = []
    for agent in agents_in(f"{title} {paper.abstract}"):
        if not any(c in lineage(agent.cls) for c in topic.intervention):
            continue
        word = re.compile(rf"\b{re.escape(agent.word)}\b", re.I)
        if any(m and word.fullmatch(m.group(3)) and m.group(3).lower() in (m.group(1).lower(), m.group(2).lower())
               for m in added):  # fmt: skip
            continue  # in both arms of an add-on trial ("A plus B versus A alone"): background, not tested
        alone = re.compile(rf"\b{re.escape(agent.word)}[- ](?:alone|only)\b", re.I)
        named = [s for s in randomising if word.search(s)]
        if not word.search(title) and named and all(len(word.findall(s)) == len(alone.findall(s)) for s in named):
            continue  # named only as the arm without the tested addition ("an eradication or omeprazole-alone regime")
        if word.search(title_tested) or (not word.search(title) and named):
            out.append(agent)
    return out


def _about_trials(paper: Paper) -> str | None:
    """A record indexed as being *about* trials (MeSH "... as Topic") with no trial publication type or
    randomisation heading is a commentary or review of trials, not a trial report."""
    topics = [h for h in paper.mesh if h.endswith("Trials as Topic")]
    if topics and not any(t in paper.pub_types for t in RANDOMISED_TYPES) and "Random Allocation" not in paper.mesh:
        return f"MeSH {topics[0]}"
    return None


# a sentence saying who took part (its aim, a count, a verb of taking part), not what is known ("In healthy
# volunteers, the pharmacokinetics of X are linear" sets the scene of a trial in patients)
TOOK_PART = re.compile(r"\b(?:were|was|took part|participated|received|underwent|completed|studied|randomi[sz]ed)\b"
                       r"|\d", re.I)  # fmt: skip


def _healthy(paper: Paper) -> re.Match[str] | None:
    """Healthy volunteers as the trial's participants: in its title, or in a sentence saying who took part."""
    said = [paper.title or "", *(s for s in sentences(paper.abstract) if SUBJECT_SENTENCE.search(s)
                                 or RANDOMISED_TEXT.search(s) or TOOK_PART.search(s))]  # fmt: skip
    return next((m for text in said if (m := HEALTHY.search(text))), None)


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
        # the sentences that randomise say what was randomised: "assigned to a heparin CVC flush solution"
        randomising = [s for s in sentences(paper.abstract) if RANDOMISED_TEXT.search(s)]
        for agent in agents:
            near = [text[max(0, m.start() - 40) : m.end() + 40] for m in re.finditer(rf"\b{re.escape(agent.word)}\b",
                                                                                     text, re.I)]  # fmt: skip
            allocated = [s for s in randomising if re.search(rf"\b{re.escape(agent.word)}\b", s, re.I)]
            if (DEVICE_USE.search(paper.title or "") or (near and all(DEVICE_USE.search(n) for n in near))
                    or (allocated and all(DEVICE_USE.search(s) for s in allocated))):  # fmt: skip
                return f"{agent.word} used as part of a device (lock, flush, coating), not as a treatment"
    match = DIAGNOSTIC_USE.search(paper.title or "") or re.search(
        rf"\b(?:{'|'.join(re.escape(a.word) for a in agents)}) test\b", paper.title or "", re.I
    )
    if match and not DIAGNOSTIC_USE.search(asked):
        return f"{agents[0].word} used as a diagnostic test (title says {match.group(0)!r}), not as a treatment"
    return None


def _subject_condition(paper: Paper, concept: Concept, topic: Topic) -> tuple[str | None, str]:
    """Where the record says the concept as its subject: its title, its MeSH headings (not one indexed as an adverse
    effect only), or an abstract sentence that opens it or states its aim or its participants (a mention in passing
    elsewhere, or in a sentence saying who was excluded, does not count): (words, where)."""
    if words := concept.find(paper.title or ""):
        return words, paper.title or ""
    headings = [h for h in paper.mesh if concept.find("", [h])]
    roles = mesh.roles(paper, headings)
    if words := concept.find("", [h for h in headings if roles.get(h) != "caused"]):
        return words, ""
    subject = [s for i, s in enumerate(sentences(paper.abstract)) if not EXCLUSION.search(s)
               and (i == 0 or SUBJECT_SENTENCE.search(s) or RANDOMISED_TEXT.search(s))]  # fmt: skip
    for sentence in subject:
        if words := concept.find(sentence):
            return words, sentence
    record = f"{paper.title} {paper.abstract} {' '.join(paper.mesh)}"
    for where in (paper.title or "", *subject):
        if words := concept.find_modified(where, record):
            return words, where
    return None, ""


def _adverse_effect_only(paper: Paper, concept: Concept) -> str | None:
    """The MeSH heading saying the concept is an adverse effect of what the record studies (indexed "chemically
    induced" and never with a treatment or prevention subheading), when every heading carrying it says so."""
    headings = [h for h in paper.mesh if concept.find("", [h])]
    roles = mesh.roles(paper, headings)
    if headings and roles and all(roles.get(h) == "caused" for h in headings):
        return f"MeSH {headings[0]}/chemically induced"
    return None


def _treats_another(paper: Paper, topic: Topic) -> str | None:
    """The condition the indexers say a record treats, when it is none of the topic's: the major MeSH headings with
    a treatment subheading ("Depressive Disorder, Major/*drug therapy"; prevention, "prevention & control", is not
    treatment here: a trial preventing thrombosis in people with cancer treats no other condition), none of which
    carries a population concept (as a heading, or its head words with the modifier in the record). None when the
    record's headings say nothing of what it treats."""
    treated = [t for t in mesh.terms(paper) if t.is_major and {"drug therapy", "therapy"} & set(t.qualifiers)]
    record = f"{paper.title} {paper.abstract} {' '.join(paper.mesh)}"
    if not treated or any(c.find("", [t.descriptor]) or c.find(t.descriptor) or c.find_modified(t.descriptor, record)
                          for t in treated for c in topic.population):  # fmt: skip
        return None
    return f"MeSH {treated[0].descriptor}/{'drug therapy' if 'drug therapy' in treated[0].qualifiers else 'therapy'}"


def _other_condition(where: str, words: str, topic: Topic) -> str | None:
    """Another condition the record puts first, with the concept as its companion ("asthma and gastro-oesophageal
    reflux", "cough with reflux"): the word before "and/with" is neither generic, nor a topic concept, nor a drug."""
    text = normalise(where).replace("-", "")
    at = text.find(normalise(words).replace("-", ""))
    if at <= 0:
        return None
    before = re.search(r"(?:([a-z][\w()-]*)\s+)?([a-z][\w()-]*)\s+(?:and|with)\s+(?:[\w()-]+\s+){0,2}$", text[:at])
    if before is None or before.group(2) in GENERIC:  # "diabetic patients with myocardial infarction": who, then
        return None  # the condition they have
    for word in (before.group(2), before.group(1)):
        if not word or len(word) < 4 or agents_in(word) or any(c.find(word) for c in topic.population):
            return None
        if re.fullmatch(r"\w+(?:ed|ing)|versus|compar\w*", word):  # "compared with", "treated with": no condition
            return None
        if word not in GENERIC:
            return word
    return None


# An organ or a state named before a condition makes another disease of it: "ocular hypertension" (glaucoma) or
# "portal hypertension" (cirrhosis) is not hypertension, "gestational diabetes" not diabetes
SITE = re.compile(r"\b(?:ocular|intraocular|portal|pulmonary(?: arterial)?|intracranial|renovascular|gestational"
                  r"|pregnancy[- ]induced)[- ]$", re.I)  # fmt: skip


def _at_another_site(where: str, words: str, concept: Concept) -> str | None:
    """The condition `words` names at another organ or state (SITE) in the text that says it (`where`: the title or
    a subject sentence), when the concept's own words do not carry that modifier; None otherwise."""
    at = where.lower().find(words.lower())
    match = SITE.search(where[:at]) if at > 0 else None
    if match is None or match.group(0).strip(" -").lower() in concept.label.lower():
        return None
    return f"{match.group(0)}{where[at : at + len(words)]}"


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
    if any(re.search(head, normalise(match.group(1))) for c in topic.population for head, _ in c.modified):
        return None  # "in patients with arthritis" for "rheumatoid arthritis": the condition's head, said broadly
    return match.group(0).strip()


# What a title says the trial treats, prevents or eradicates: "in the prevention of chemotherapy-induced
# gastroduodenal injury", "curing Helicobacter pylori infection", "Helicobacter pylori eradication"; the phrase
# ends where the title goes on to say who, how or what follows ("in", "with", "does not provoke ..."); the groups
# "cured", "curing" and "eradicated" name an infection the trial eradicates
TITLE_TARGET = re.compile(
    r"\b(?:prevention|prophylaxis|treatment|therapy|management|control) of (?:the )?(?P<of>[^.:;,()?]+)"
    r"|\b(?:treating|preventing)\s+(?P<verb>[^.:;,()?]+)|\b(?:eradication|cure) of (?:the )?(?P<cured>[^.:;,()?]+)"
    r"|\b(?:curing|eradicating)\s+(?P<curing>[^.:;,()?]+)|(?P<eradicated>(?:[\w-]+\.?\s+){1,3}?)eradication\b",
    re.I,
)
_TARGET_END = re.compile(r"\s+(?:in|by|among|using|versus|vs\.?|compared|after|during|for|on|does|do|did|is|are"
                         r"|was|were|has|have|may|can|could|reduces?|improves?|provokes?|affects?)\b.*$", re.I)  # fmt: skip
# Words of a target that name no condition: the course of one ("relapse of ..."), its stage or who has it
_TARGET_GENERIC = GENERIC | frozenset("relapse relapses recurrence recurrences complications complication disease "
                                      "diseases disorders disorder increase increases rise the a an its their".split())  # fmt: skip


_PEOPLE = re.compile(r"\b(?:patients|people|persons|subjects|children|adults|women|men|infants|adolescents"
                     r"|individuals|outpatients|inpatients|volunteers)\b", re.I)  # fmt: skip
# who a title says the trial is in: up to four words after "in", "of", "among" or "with"
_TITLE_WHO = re.compile(r"\b(?:in|of|among|with)\s+(?=((?:[\w'-]+[\s,]+){0,3}[\w'-]+))", re.I)


def _shares_head(phrase: str, concept: Concept) -> bool:
    """A word of five letters or more that the phrase shares with the concept's label: the condition said in other
    words than the concept's ("acid reflux disease" for "gastroesophageal reflux")."""
    words = {w for w in re.findall(r"[a-z]{5,}", normalise(concept.label)) if w not in _TARGET_GENERIC}
    return bool(words & set(re.findall(r"[a-z]{5,}", normalise(phrase))))


def _title_target(title: str, topic: Topic) -> str | None:
    """The condition a title says the trial treats, prevents or eradicates, when none of the title's such phrases
    names a topic concept (or a word of its label: `_shares_head`) and the title does not name the concept as its
    people either ("in schizophrenia", "of dementia", "in patients with reflux": `_TITLE_WHO`); else None. A target
    naming a treatment or people ("treatment of first-episode psychotic patients") says nothing of the condition.
    An infection the title eradicates is the target whoever the people are (the eradication regimen is what the
    trial tests). A record whose title's target is another condition studies that condition, wherever the abstract
    mentions the topic's ("Curing Helicobacter pylori infection in patients with duodenal ulcer does not provoke
    gastroesophageal reflux disease": reflux is the outcome watched, not the condition treated)."""
    targets = []
    for match in TITLE_TARGET.finditer(title):
        phrase = _TARGET_END.sub("", next(g for g in match.groups() if g is not None)).strip()
        if (by := re.search(r"\s+with\s+(.*)$", phrase, re.I)) and agents_in(by.group(1)):
            phrase = phrase[: by.start()]  # "of reflux oesophagitis with omeprazole": the treatment follows
        phrase = re.sub(r"^(?:of|on|and|the)\s+", "", phrase, flags=re.I)  # "impact of H. pylori eradication"
        words = [w for w in re.findall(r"[a-z][\w-]*", phrase.lower()) if w not in _TARGET_GENERIC]
        if not words or agents_in(phrase) or _PEOPLE.search(phrase):
            continue
        if any(c.find(phrase) or c.find_modified(phrase, title) or _shares_head(phrase, c) for c in topic.population):
            return None
        if match.lastgroup in ("cured", "curing", "eradicated"):
            return phrase  # an eradication regimen is the trial's intervention, whoever its participants are
        targets.append(phrase)
    if not targets or any(c.find(m.group(1)) for m in _TITLE_WHO.finditer(title) for c in topic.population):
        return None
    return targets[0]


# Comparators that are not drugs, by the words trials name them with (arms of a title, sentences that randomise
# or compare): the label names the comparator in a question ("proton pump inhibitor versus surgery")
NON_DRUG = (  # labels: model.NON_DRUG_LABELS
    ("surgery", re.compile(r"\bsurg(?:ery|ical)\b|\bfundoplication\b|\boperati(?:on|ve)\b|\b\w{4,}ectomy\b"
                           r"|\blaparoscopic\b", re.I)),  # fmt: skip
    ("a procedure", re.compile(r"\bphotodynamic therapy\b|\bPDT\b|\blaser\b|\bphotocoagulation\b|\bradiotherapy\b"
                               r"|\bradiation therapy\b|\bendoscopic (?:therapy|treatment|ligation|dilat\w*)\b"
                               r"|\bacupuncture\b|\bbrachytherapy\b|\bcompression stockings?\b", re.I)),  # fmt: skip
    ("exercise, diet or education", re.compile(r"\bexercise (?:training|programme|program|therapy)\b|\bdietary "
                                               r"(?:advice|intervention|counsel\w*)\b|\bpatient education\b"
                                               r"|\blifestyle (?:advice|intervention|modification)\b", re.I)),
)  # fmt: skip
# Two arms of one agent that differ in dose, schedule, route or formulation
DOSE = re.compile(r"\b\d+(?:[.,]\d+)?\s*(?:mg|µg|μg|mcg|g|ml|units?|IU)(?:/kg|/m2)?\b", re.I)
SCHEDULE = re.compile(
    r"\b(?:once|twice|three times) (?:a |per )?(?:day|daily|week|weekly|month|monthly)\b|\bb\.?i\.?d\b|\bt\.?i\.?d\b"
    r"|\bq\.?d\b|\bo\.?d\.?(?=\W)|\balternate[- ]day\b|\bon[- ]demand\b|\bas[- ]needed\b|\bPRN\b|\bintermittent\w*"
    r"|\bcontinuous\w*|\bevery (?:\d+|two|three|four|six|eight|twelve) (?:weeks?|months?|days?)\b|\bmonthly\b"
    r"|\bquarterly\b|\btreat[- ]and[- ]extend\b|\bextended[- ]interval\b|\b(?:loading|maintenance) doses?\b"
    r"|\b(?:immediate|extended|sustained|controlled|modified|delayed)[- ]release\b|\btransdermal\b|\bintravenous\w*"
    r"|\bsubcutaneous\w*|\bintramuscular\w*|\bnasal spray\b|\borally disintegrating\b|\bhigh[- ]dose\b"
    r"|\blow[- ]dose\b|\bdoses? of\b|\bdosing (?:regimens?|schedules?)\b|\bdose[- ](?:ranging|response|finding)\b",
    re.I,
)
# a no-treatment arm in a trial's own words ("randomized to receive or not", "compared with no warfarin")
NO_TREATMENT = re.compile(r"\b(?:receive|given|treated) or not\b|\b(?:no|without) (?:[\w-]+ ){0,2}?(?:prophyla\w*|"
                          r"treatment|therapy|medication|intervention)\b(?!-)|\buntreated\b", re.I)  # fmt: skip


def _dose_or_schedule(parts: Sequence[str]) -> str | None:
    """The words saying two arms differ in dose, schedule or formulation of one agent, or None."""
    text = " ".join(parts)
    doses = {re.sub(r"\s+", "", m.group(0).lower()) for m in DOSE.finditer(text)}
    if len(doses) >= 2:
        return " and ".join(sorted(doses)[:2])
    match = SCHEDULE.search(text)
    return match.group(0) if match else None


def comparators_of(paper: Paper, agents: Sequence[Agent], topic: Topic | None = None) -> list[str]:
    """Every comparator a trial tests its agents against, as the trial names them (a title's second arm, or a
    sentence that randomises or compares; a treatment every participant gets is background), in this order: the
    class of each agent outside the tested class's family (not a word of the topic's population such as
    "chemotherapy" for cancer, not a class the record names as the cause of the condition: cyclophosphamide in a
    trial of "chemotherapy-induced" injury), a non-drug comparator (surgery, a procedure, exercise, diet or
    education), "another <class>" (another agent of the topic's class, head to head: celecoxib versus diclofenac is
    within "non-steroidal anti-inflammatory drug"), "placebo or no treatment" (placebo, sham, no treatment, usual
    care, waiting list); when none of these, the dose, schedule or formulation of the same agent, else "comparator
    not named in the title or abstract". A multi-arm trial names several."""
    text = f"{paper.title} {paper.abstract}"
    tested = agents[0].cls if agents else ""
    family = [c for c in (topic.intervention if topic else ()) if c in lineage(tested)] or [tested]
    title = paper.title or ""
    arms = re.split(r"\s+(?:versus|vs\.?|v\.?|compared (?:with|to)|or)\s+", title, maxsplit=1, flags=re.I)[1:]
    if not arms and TITLE_COMPARISON.search(title):  # "a comparison of omeprazole and ranitidine"
        arms = [BACKGROUND_TREATMENT.sub(" ", title)]
    chosen = [BACKGROUND_TREATMENT.sub(" ", s) for s in sentences(paper.abstract)
              if RANDOMISED_TEXT.search(s) or _COMPARE.search(s) or len(ARM_SIZE.findall(s)) >= 2]  # fmt: skip
    population = topic.population if topic else ()
    causes = {a.cls for m in INDUCED.finditer(text) for a in agents_in(m.group(1))}
    named = agents_in(" ".join([*arms, *chosen]))

    def in_family(agent: Agent) -> bool:
        return any(f in lineage(agent.cls) for f in family)

    out = list(dict.fromkeys(
        a.cls for a in named if not in_family(a) and not any(c.find(a.word) for c in population)
        and a.cls != tested and tested not in lineage(a.cls) and a.cls not in lineage(tested)
        and not causes & set(lineage(a.cls))
    ))  # fmt: skip
    out += [label for label, pattern in NON_DRUG if any(pattern.search(part) for part in (*arms, *chosen))]
    own = {a.word for a in agents if in_family(a) and not classes_named(a.word)}  # agents, not a class's name
    # another agent of the family, or the family's broader class against a narrower one ("celecoxib versus NSAIDs")
    rivals = {a.word for a in named if in_family(a) and a.word not in own
              and (not classes_named(a.word) or (a.cls != tested and a.cls in lineage(tested)))}  # fmt: skip
    if len(own) >= 2 or rivals:
        out.append(f"another {family[0]}")
    tested_words = "|".join(re.escape(a.word) for a in agents)
    no_agent = re.search(rf"\b(?:no|without|versus not|vs\.? not) (?:{tested_words})\b", text, re.I) if agents else None
    if PLACEBO.search(text) or re.search(r"\bsham\b", text, re.I) or NO_TREATMENT.search(text) or no_agent:
        out.append(PLACEBO_ARM)
    if not out and _dose_or_schedule([*arms, *chosen, paper.title or ""]):
        out.append(DOSE_OR_SCHEDULE)
    return out or [NOT_NAMED]


def comparator_of(paper: Paper, agents: Sequence[Agent], topic: Topic | None = None) -> str:
    """The first of `comparators_of`: the comparator a trial names first."""
    return comparators_of(paper, agents, topic)[0]


def eligibility(paper: Paper, topic: Topic) -> Eligibility:
    """Whether `paper` is a trial a reviewer would accept for the topic's treatment question, and why (read from its
    corrected title: an erratum's "[correction of ...]" words are not the trial's)."""
    paper = as_read(paper)
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
    if match := _healthy(paper):
        return Eligibility(pmid, False, f"healthy volunteers ({match.group(0)!r})")
    physiology = PHYSIOLOGY.search(paper.title or "") if not CLINICAL_OUTCOME.search(paper.title or "") else None
    if match := MECHANISM.search(paper.title or "") or physiology:
        return Eligibility(pmid, False, f"a pharmacokinetic or mechanism study (title says {match.group(0)!r})")
    found = []
    title_target = _title_target(paper.title or "", topic)  # the same for every concept; checked in the loop's order
    for concept in topic.population:
        words, where = _subject_condition(paper, concept, topic)
        if words is None and (caused := _adverse_effect_only(paper, concept)):
            return Eligibility(pmid, False, f"{concept.label!r} is an adverse effect here, not the condition treated "
                                            f"({caused})")  # fmt: skip
        if words is None:
            anywhere = concept.find(f"{paper.title} {paper.abstract}")
            return Eligibility(pmid, False, f"another condition or population (no {concept.label!r}"
                                            + (f"; {anywhere!r} only in passing)" if anywhere else ")"))  # fmt: skip
        if other := _other_condition(where, words, topic):
            return Eligibility(pmid, False, f"another condition first ({other!r} with {concept.label!r})")
        if other := _at_another_site(where, words, concept):
            return Eligibility(pmid, False, f"another condition ({other!r}, not {words!r})")
        if title_target:
            why = f"treats another condition (title: {title_target!r}, not {concept.label!r})"
            return Eligibility(pmid, False, why)
        if where not in ("", paper.title) and (people := _title_population(paper.title or "", topic)):
            return Eligibility(pmid, False, f"another population (title: {people!r})")
        if caused := _adverse_effect_only(paper, concept):
            return Eligibility(pmid, False, f"{concept.label!r} is an adverse effect here, not the condition treated "
                                            f"({caused})")  # fmt: skip
        found.append(f"{concept.label} ({words!r})")
    if not all(c.find(paper.title or "") for c in topic.population) and (other := _treats_another(paper, topic)):
        return Eligibility(pmid, False, f"treats another condition ({other}); "
                                        f"{' and '.join(c.label for c in topic.population)} not in its title")  # fmt: skip
    agents = tested_agents(paper, topic)
    # a class in the title broader than the topic's ("behavioral and drug treatment") says nothing against it
    title_agents = [a for a in agents_in(paper.title or "") if not any(a.cls in lineage(c) for c in topic.intervention)
                    or a.cls in topic.intervention]  # fmt: skip
    if title_agents and not any(a in agents for a in title_agents):
        other = title_agents[0]
        if any(c in lineage(other.cls) for c in topic.intervention):
            return Eligibility(pmid, False, f"does not test {' or '.join(topic.intervention)}: the title names "
                                            f"{other.word} only as a comparator or a treatment every participant "
                                            f"takes")  # fmt: skip
        return Eligibility(pmid, False, f"tests {other.word} ({other.cls}), not {' or '.join(topic.intervention)}")
    if not agents:
        return Eligibility(pmid, False, f"does not test {' or '.join(topic.intervention)}")
    if why := _used_as(paper, agents, topic):
        return Eligibility(pmid, False, why)
    if why := not_a_trial_report(paper):
        return Eligibility(pmid, False, f"not a report of the trial's effects: {why}")
    comparators = comparators_of(paper, agents, topic)
    if topic.comparator:
        comparators = [x for x in comparators if any(compares_with(x, c) for c in topic.comparator)]
        if not comparators:
            return Eligibility(pmid, False, f"compares with {comparator_of(paper, agents, topic)}, not "
                                            f"{' or '.join(topic.comparator)}")  # fmt: skip
    members = [a for a in agents if not classes_named(a.word)]  # the class's own name is no agent: named once
    tested = ", ".join(f"{a.word} ({a.cls})" for a in members[:3]) or " or ".join(dict.fromkeys(a.cls for a in agents))
    reason = f"randomised ({design}); in humans with {'; '.join(found)}; tests {tested}; vs {' and '.join(comparators)}"
    return Eligibility(pmid, True, reason, tuple(agents), comparators[0], comparators=tuple(comparators))
