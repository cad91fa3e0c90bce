"""Intervention classes: which agent belongs to which treatment class, by published naming systems.

Rules, not a model. An agent is placed in a class by:
- its WHO International Nonproprietary Name stem (WHO, "The use of stems in the selection of INN for
  pharmaceutical substances", 2018 and later lists): -prazole proton pump inhibitors, -tidine H2-receptor
  antagonists, -parin low-molecular-weight heparins, -xaban factor Xa inhibitors, -gatran thrombin
  inhibitors, -vastatin statins, -olol beta blockers, -pril ACE inhibitors, -sartan angiotensin II receptor
  antagonists, -oxetine/-aline/-opram serotonin reuptake inhibitors, ...;
- the named members of classes whose INNs share no stem (warfarin, acenocoumarol and phenprocoumon are
  vitamin K antagonists in ATC B01AA; fondaparinux is an indirect factor Xa inhibitor, ATC B01AX05);
- the WHO ATC grouping above a class (ATC B01A antithrombotic agents holds heparins, vitamin K
  antagonists and factor Xa inhibitors: all are "anticoagulants"), kept as each class's `parents`;
- psychological therapies by the names of their families (Cochrane Common Mental Disorders group's
  classification: cognitive behavioural, behavioural, psychodynamic, interpersonal, third-wave therapies).
MeSH headings of a record (when the store holds them) add agents by the same table: the heading
"Heparin, Low-Molecular-Weight" names the class itself.

The table is general (it knows nothing of any one review); `classes_of` and `agents_in` read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class DrugClass:
    """One intervention class: its name, the words that name it, its INN stems and named members."""

    name: str
    names: tuple[str, ...]  # words naming the class itself (regex pieces, matched at word starts)
    stems: tuple[str, ...] = ()  # INN suffixes (an agent is a word ending in one)
    members: tuple[str, ...] = ()  # named agents without a shared stem (regex pieces)
    parents: tuple[str, ...] = ()  # broader classes (ATC level above)
    source: str = "WHO INN stems"


CLASSES: tuple[DrugClass, ...] = (
    DrugClass("anticoagulant", (r"anticoagula\w*", r"antithrombotic\w*", r"thromboprophyla\w*"),
              source="WHO ATC B01A"),
    DrugClass("heparin", (r"heparins?", r"unfractionated heparin", r"UFH"), members=(r"heparin",),
              parents=("anticoagulant",), source="WHO ATC B01AB"),
    DrugClass("low-molecular-weight heparin", (r"low[- ]molecular[- ]weight heparins?", r"LMWHs?"),
              stems=("parin",), members=(r"fragmin", r"clexane", r"lovenox", r"fraxiparin\w*", r"innohep"),
              parents=("heparin", "anticoagulant"), source="WHO INN stem -parin, ATC B01AB"),
    DrugClass("vitamin K antagonist", (r"vitamin K antagonists?", r"VKAs?", r"coumarins?", r"oral anticoagulants?"),
              members=(r"warfarin", r"acenocoum\w*", r"phenprocoumon", r"fluindione", r"coumadin", r"sintrom"),
              parents=("anticoagulant",), source="WHO ATC B01AA"),
    DrugClass("factor Xa inhibitor", (r"factor Xa inhibitors?", r"anti-?Xa", r"DOACs?", r"NOACs?"),
              stems=("xaban",), members=(r"fondaparinux",), parents=("anticoagulant",),
              source="WHO INN stem -xaban, ATC B01AF/B01AX05"),
    DrugClass("direct thrombin inhibitor", (r"direct thrombin inhibitors?",), stems=("gatran",),
              members=(r"\w*rudin", r"bivalirudin", r"argatroban"), parents=("anticoagulant",),
              source="WHO INN stem -gatran/-irudin, ATC B01AE"),
    DrugClass("thrombolytic", (r"thromboly\w*", r"fibrinoly\w*"), stems=("teplase",),
              members=(r"urokinase", r"streptokinase"), source="WHO INN stem -teplase, ATC B01AD"),
    DrugClass("antibiotic", (r"antibiotics?", r"antimicrobials?"), stems=("cillin", "mycin", "cycline", "floxacin"),
              members=(r"cef\w+", r"vancomycin", r"teicoplanin"), source="WHO INN stems -cillin/-cycline, ATC J01"),
    DrugClass("antineoplastic", (r"chemotherap\w*", r"antineoplastic\w*", r"cytotoxic\w*"),
              stems=("platin", "taxel", "rubicin", "citabine"), source="WHO INN stems -platin/-taxel, ATC L01"),
    DrugClass("antiplatelet", (r"antiplatelets?", r"platelet aggregation inhibitors?"), stems=("grel",),
              members=(r"aspirin", r"acetylsalicylic acid"), source="WHO INN stem -grel, ATC B01AC"),
    DrugClass("proton pump inhibitor", (r"proton[- ]pump inhibit\w*", r"PPIs?"), stems=("prazole",),
              parents=("acid suppressant",), source="WHO INN stem -prazole, ATC A02BC"),
    DrugClass("H2-receptor antagonist", (r"H2[- ]?(?:receptor )?(?:antagonists?|blockers?)", r"H2RAs?"),
              stems=("tidine",), parents=("acid suppressant",), source="WHO INN stem -tidine, ATC A02BA"),
    DrugClass("acid suppressant", (r"acid[- ]suppress\w*", r"antisecretory", r"antacids?"), source="WHO ATC A02"),
    DrugClass("prokinetic", (r"prokinetic\w*",), stems=("pride",), members=(r"domperidone", r"metoclopramide"),
              source="WHO INN stem -pride, ATC A03F"),
    DrugClass("biguanide", (r"biguanides?",), stems=("formin",), parents=("glucose-lowering drug",),
              source="WHO INN stem -formin, ATC A10BA"),
    DrugClass("SGLT2 inhibitor", (r"SGLT-?2 inhibitors?",), stems=("gliflozin",), parents=("glucose-lowering drug",),
              source="WHO INN stem -gliflozin, ATC A10BK"),
    DrugClass("DPP-4 inhibitor", (r"DPP-?4 inhibitors?", r"gliptins?"), stems=("gliptin",),
              parents=("glucose-lowering drug",), source="WHO INN stem -gliptin, ATC A10BH"),
    DrugClass("GLP-1 receptor agonist", (r"GLP-?1 (?:receptor )?agonists?",), stems=("glutide", "enatide"),
              parents=("glucose-lowering drug",), source="WHO INN stems -glutide/-enatide, ATC A10BJ"),
    DrugClass("glucose-lowering drug", (r"(?:oral )?(?:hypoglyc(?:a)?emic|antidiabetic|glucose-lowering) (?:drugs?|agents?)",
              r"insulins?"), source="WHO ATC A10"),
    DrugClass("bisphosphonate", (r"bisphosphonates?",), stems=("dronate", "dronic acid"), source="WHO INN stem -dronate, ATC M05BA"),
    DrugClass("statin", (r"statins?", r"HMG-CoA reductase inhibitors?"), stems=("vastatin",),
              source="WHO INN stem -vastatin, ATC C10AA"),
    DrugClass("beta blocker", (r"beta[- ]?blockers?", r"beta-adrenergic (?:receptor )?antagonists?"),
              stems=("olol", "alol"), source="WHO INN stem -olol, ATC C07"),
    DrugClass("ACE inhibitor", (r"ACE inhibitors?", r"angiotensin[- ]converting enzyme inhibitors?"),
              stems=("pril", "prilat"), source="WHO INN stem -pril, ATC C09A"),
    DrugClass("angiotensin II receptor antagonist", (r"angiotensin (?:II )?receptor (?:antagonists|blockers)", r"ARBs?"),
              stems=("sartan",), source="WHO INN stem -sartan, ATC C09C"),
    DrugClass("selective serotonin reuptake inhibitor", (r"SSRIs?", r"serotonin reuptake inhibitors?"),
              stems=("oxetine", "opram", "traline", "oxamine"), parents=("antidepressant",),
              source="WHO INN stems -oxetine/-opram, ATC N06AB"),
    DrugClass("tricyclic antidepressant", (r"tricyclic\w*", r"TCAs?"), stems=("triptyline", "ipramine"),
              parents=("antidepressant",), source="WHO INN stems -triptyline/-ipramine, ATC N06AA"),
    DrugClass("antidepressant", (r"antidepressants?",), members=(r"bupropion", r"mirtazapine", r"venlafaxine"),
              source="WHO ATC N06A"),
    DrugClass("benzodiazepine", (r"benzodiazepines?",), stems=("azepam", "azolam"), source="WHO INN stem -azepam"),
    DrugClass("antipsychotic", (r"antipsychotics?", r"neuroleptics?"), stems=("peridone", "apine", "piprazole"),
              source="WHO INN stems -peridone/-apine/-piprazole, ATC N05A"),
    DrugClass("corticosteroid", (r"corticosteroids?", r"glucocorticoids?", r"steroids?"),
              stems=("sone", "olone"), source="WHO INN stems -sone/-olone, ATC H02"),
    DrugClass("antiepileptic", (r"anti-?epileptics?", r"anticonvulsants?"), stems=("racetam",),
              members=(r"valpro\w*", r"carbamazepine", r"lamotrigine", r"levetiracetam", r"phenytoin"),
              source="WHO ATC N03A"),
    DrugClass("ketogenic diet", (r"ketogenic diets?", r"modified Atkins diet", r"low glycaemic index treatment"),
              source="dietary therapy family"),
    DrugClass("cognitive behavioural therapy", (r"cognitive[- ]behaviou?ral therap\w*", r"CBT", r"cognitive therap\w*"),
              parents=("psychological therapy",), source="Cochrane CCMD psychological therapy classification"),
    DrugClass("behavioural therapy", (r"behaviou?ral activation", r"exposure therap\w*", r"behaviou?r therap\w*"),
              parents=("psychological therapy",), source="Cochrane CCMD psychological therapy classification"),
    DrugClass("psychodynamic therapy", (r"psychodynamic\w*", r"psychoanalytic\w*"), parents=("psychological therapy",),
              source="Cochrane CCMD psychological therapy classification"),
    DrugClass("interpersonal therapy", (r"interpersonal (?:psycho)?therap\w*", r"IPT"), parents=("psychological therapy",),
              source="Cochrane CCMD psychological therapy classification"),
    DrugClass("third-wave therapy", (r"mindfulness\w*", r"acceptance and commitment therap\w*", r"dialectical behaviou?r\w*"),
              parents=("psychological therapy",), source="Cochrane CCMD psychological therapy classification"),
    DrugClass("psychological therapy", (r"psychotherap\w*", r"psychological (?:therap\w*|treatment|intervention)s?",
              r"counsel+ing"), source="Cochrane CCMD psychological therapy classification"),
)  # fmt: skip
BY_NAME = {c.name: c for c in CLASSES}
PLACEBO = re.compile(
    r"\bplacebo\w*|\bno (?:prophylaxis|treatment|anticoagula\w*|intervention|therapy)\b|\bwait(?:ing)?[- ]list\b"
    r"|\busual care\b|\bstandard care\b|\buntreated\b|\bobservation\b|\bcontrol group\b",
    re.I,
)


@dataclass(frozen=True)
class Agent:
    """An intervention named in a record: the word as written and the class it belongs to."""

    word: str  # lower-case
    cls: str

    def in_class(self, name: str) -> bool:
        """Whether this agent belongs to class `name` (itself or a parent, transitively)."""
        return name in lineage(self.cls)


@cache
def lineage(name: str) -> tuple[str, ...]:
    """The class and every broader class above it (ATC levels), nearest first."""
    out, todo = [], [name]
    while todo:
        cls = todo.pop(0)
        if cls not in out:
            out.append(cls)
            todo.extend(BY_NAME[cls].parents if cls in BY_NAME else ())
    return tuple(out)


def _word_pattern(piece: str) -> re.Pattern[str]:
    """Abbreviations (capitals, an optional plural "s?") match case-sensitively, everything else ignores case."""
    bare = piece.removesuffix("s?")
    return re.compile(rf"\b(?:{piece})\b", 0 if bare.isupper() and bare.isalpha() else re.I)


@cache
def _patterns() -> list[tuple[re.Pattern[str], str, bool]]:
    """(pattern, class, names the class itself): agents first, longest INN stem first (aripiprazole is an
    antipsychotic, not a -prazole), then named members, then the words naming classes."""
    stems = sorted(((stem, cls.name) for cls in CLASSES for stem in cls.stems), key=lambda pair: -len(pair[0]))
    out = [(re.compile(rf"\b\w{{3,}}{stem}\b", re.I), cls, False) for stem, cls in stems]
    out += [(_word_pattern(member), cls.name, False) for cls in CLASSES for member in cls.members]
    out += [(_word_pattern(name), cls.name, True) for cls in CLASSES for name in cls.names]
    return out


def agents_in(text: str) -> list[Agent]:
    """Every agent or class named in `text`, in order of first mention, one per word."""
    found: dict[str, tuple[int, Agent]] = {}
    for pattern, cls, _ in _patterns():
        for match in pattern.finditer(text or ""):
            word = match.group(0).lower()
            if word not in found and not _shadowed(word, cls, found):
                found[word] = (match.start(), Agent(word, cls))
    return [agent for _, agent in sorted(found.values(), key=lambda pair: pair[0])]


def _shadowed(word: str, cls: str, found: dict[str, tuple[int, Agent]]) -> bool:
    """'heparin' inside 'low-molecular-weight heparin' is already counted as the narrower class."""
    return any(word in other and word != other for other in found)


def classes_named(text: str) -> list[str]:
    """The classes whose own names occur in `text` ("anticoagulation" → anticoagulant), narrowest first."""
    out = []
    for pattern, cls, names_class in _patterns():
        if names_class and pattern.search(text or "") and cls not in out:
            out.append(cls)
    return out


def member_pattern(cls: str) -> re.Pattern[str]:
    """A regex matching any agent or name of class `cls` or of a class below it (for coverage checks)."""
    below = [c for c in CLASSES if cls in lineage(c.name)]
    pieces = [p for c in below for p in (*c.names, *c.members, *(rf"\w{{3,}}{s}" for s in c.stems))]
    return re.compile(rf"\b(?:{'|'.join(pieces)})\b", re.I)
