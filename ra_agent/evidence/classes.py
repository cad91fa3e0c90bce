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
- every drug class at the top of its ATC group sits under "pharmacological treatment" (a question about "drug
  treatments" or "pharmacological interventions" takes any of them);
- psychological therapies by the names of their families (Cochrane Common Mental Disorders group's
  classification: cognitive behavioural, behavioural, third-wave, psychodynamic, humanistic, integrative
  (interpersonal), systemic (family, couples) therapies).
Brand names are not in the table (INNs only).
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
              stems=("parin",), parents=("heparin", "anticoagulant"), source="WHO INN stem -parin, ATC B01AB"),
    DrugClass("vitamin K antagonist", (r"vitamin K antagonists?", r"VKAs?", r"coumarins?", r"oral anticoagulants?"),
              members=(r"warfarin", r"acenocoum\w*", r"phenprocoumon", r"fluindione"),
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
    DrugClass("serotonin-noradrenaline reuptake inhibitor", (r"SNRIs?", r"serotonin[- ]norepinephrine reuptake inhibitors?",
              r"serotonin[- ]noradrenaline reuptake inhibitors?"),
              members=(r"duloxetine", r"venlafaxine", r"desvenlafaxine", r"milnacipran", r"levomilnacipran"),
              parents=("antidepressant",), source="WHO ATC N06AX"),
    DrugClass("antidepressant", (r"antidepressants?",), members=(r"bupropion", r"mirtazapine", r"trazodone",
              r"vortioxetine", r"agomelatine"), source="WHO ATC N06A"),
    DrugClass("benzodiazepine", (r"benzodiazepines?",), stems=("azepam", "azolam"), source="WHO INN stem -azepam"),
    DrugClass("antipsychotic", (r"antipsychotics?", r"neuroleptics?"), stems=("peridone", "apine", "piprazole"),
              source="WHO INN stems -peridone/-apine/-piprazole, ATC N05A"),
    DrugClass("corticosteroid", (r"corticosteroids?", r"glucocorticoids?", r"steroids?"),
              stems=("sone", "olone"), source="WHO INN stems -sone/-olone, ATC H02"),
    DrugClass("antiepileptic", (r"anti-?epileptics?", r"anticonvulsants?"), stems=("racetam",),
              members=(r"valpro\w*", r"carbamazepine", r"lamotrigine", r"levetiracetam", r"phenytoin", r"gabapentin",
                       r"pregabalin", r"topiramate"), source="WHO ATC N03A"),
    DrugClass("anti-VEGF agent", (r"anti-?VEGF\w*", r"VEGF inhibitors?", r"antineovasculari[sz]ation agents?"),
              members=(r"ranibizumab", r"bevacizumab", r"aflibercept", r"pegaptanib", r"brolucizumab", r"faricimab",
                       r"conbercept"), source="WHO ATC S01LA (bevacizumab L01FG01)"),
    DrugClass("monoclonal antibody", (r"monoclonal antibod(?:y|ies)",), stems=("mab",), source="WHO INN stem -mab"),
    DrugClass("kinase inhibitor", (r"(?:tyrosine )?kinase inhibitors?", r"TKIs?"), stems=("tinib",),
              source="WHO INN stem -tinib, ATC L01E"),
    DrugClass("antiviral", (r"antivirals?",), stems=("vir",), source="WHO INN stem -vir, ATC J05"),
    DrugClass("azole antifungal", (r"antifungals?", r"azoles?"), stems=("conazole",),
              source="WHO INN stem -conazole, ATC J02AC"),
    DrugClass("calcium channel blocker", (r"calcium[- ]channel blockers?", r"calcium antagonists?"), stems=("dipine",),
              members=(r"verapamil", r"diltiazem"), source="WHO INN stem -dipine, ATC C08"),
    DrugClass("5-HT3 antagonist", (r"5-?HT3 (?:receptor )?antagonists?", r"setrons?"), stems=("setron",),
              source="WHO INN stem -setron, ATC A04AA"),
    DrugClass("triptan", (r"triptans?",), stems=("triptan",), source="WHO INN stem -triptan, ATC N02CC"),
    DrugClass("leukotriene receptor antagonist", (r"leukotriene (?:receptor )?antagonists?",), stems=("lukast",),
              source="WHO INN stem -lukast, ATC R03DC"),
    DrugClass("beta2 agonist", (r"beta-?2[- ]?(?:adrenergic )?agonists?",), stems=("terol",),
              source="WHO INN stem -terol, ATC R03AC"),
    DrugClass("non-steroidal anti-inflammatory drug", (r"NSAIDs?", r"non-?steroidal anti-?inflammatory\w*"),
              stems=("profen", "fenac", "coxib"), members=(r"naproxen", r"indometacin", r"indomethacin"),
              source="WHO INN stems -profen/-fenac/-coxib, ATC M01A"),
    DrugClass("opioid", (r"opioids?", r"opiates?"), members=(r"morphine", r"codeine", r"oxycodone", r"hydromorphone",
              r"fentanyl", r"tramadol", r"tapentadol", r"buprenorphine", r"methadone"), source="WHO ATC N02A"),
    DrugClass("local anaesthetic", (r"local ana?esthetics?",), stems=("caine",), source="WHO INN stem -caine, ATC N01B"),
    DrugClass("cholinesterase inhibitor", (r"(?:acetyl)?cholinesterase inhibitors?",),
              members=(r"donepezil", r"rivastigmine", r"galantamine"), source="WHO ATC N06DA"),
    DrugClass("NMDA receptor antagonist", (r"NMDA (?:receptor )?antagonists?",),
              members=(r"memantine", r"ketamine", r"esketamine"), source="WHO ATC N06DX/N01AX"),
    DrugClass("psychostimulant", (r"psychostimulants?",), stems=("fetamine", "fenidate"),
              members=(r"modafinil", r"amphetamine"), source="WHO INN stems -fetamine/-fenidate, ATC N06B"),
    DrugClass("dopamine agonist", (r"dopamine agonists?",), stems=("pexole", "inirole"), members=(r"rotigotine",),
              source="WHO ATC N04BC"),
    DrugClass("melatonin receptor agonist", (r"melatonin(?:ergic)? (?:receptor )?agonists?",), stems=("melteon",),
              members=(r"melatonin",), source="WHO INN stem -melteon, ATC N05CH"),
    DrugClass("diuretic", (r"diuretics?",), stems=("semide", "thiazide"), source="WHO INN stems -semide/-thiazide, ATC C03"),
    DrugClass("pharmacological treatment", (r"pharmacolog\w* (?:treatments?|interventions?|therap\w*|management)",
              r"pharmacotherap\w*", r"drug (?:treatments?|therap(?:y|ies)|interventions?)"),
              source="any drug of this table (every WHO ATC group)"),
    DrugClass("ketogenic diet", (r"ketogenic diets?", r"modified Atkins diet", r"low glycaemic index treatment"),
              source="dietary therapy family"),
    DrugClass("cognitive behavioural therapy", (r"cognitive[- ]behaviou?ral (?:therap\w*|treatments?|interventions?)",
              r"CBT", r"cognitive therap\w*", r"problem[- ]solving therap\w*", r"rational[- ]emotive\w*",
              r"schema therap\w*", r"cognitive behaviou?ral analysis system of psychotherapy", r"CBASP"),
              parents=("psychological therapy",), source="Cochrane CCMD psychological therapy classification"),
    DrugClass("behavioural therapy", (r"behaviou?ral activation", r"exposure therap\w*", r"behaviou?r therap\w*"),
              parents=("psychological therapy",), source="Cochrane CCMD psychological therapy classification"),
    DrugClass("psychodynamic therapy", (r"psychodynamic\w*", r"psychoanalytic\w*"), parents=("psychological therapy",),
              source="Cochrane CCMD psychological therapy classification"),
    DrugClass("interpersonal therapy", (r"interpersonal (?:psycho)?therap\w*", r"IPT"), parents=("psychological therapy",),
              source="Cochrane CCMD psychological therapy classification"),
    DrugClass("third-wave therapy", (r"mindfulness\w*", r"acceptance and commitment therap\w*", r"dialectical behaviou?r\w*",
              r"metacognitive therap\w*", r"compassion[- ]focused therap\w*"),
              parents=("psychological therapy",), source="Cochrane CCMD psychological therapy classification"),
    DrugClass("humanistic therapy", (r"person[- ]cent(?:red|ered) therap\w*", r"client[- ]cent(?:red|ered) therap\w*",
              r"gestalt therap\w*", r"emotion[- ]focused therap\w*", r"experiential therap\w*", r"counsel+ing"),
              parents=("psychological therapy",), source="Cochrane CCMD psychological therapy classification"),
    DrugClass("systemic therapy", (r"family therap\w*", r"couples? therap\w*", r"marital therap\w*"),
              parents=("psychological therapy",), source="Cochrane CCMD psychological therapy classification"),
    DrugClass("psychological therapy", (r"psychotherap\w*", r"psychological (?:therap\w*|treatments?|interventions?)",
              r"talking therap\w*", r"psychoeducation\w*", r"eye movement desensiti[sz]ation\w*", r"EMDR"),
              source="Cochrane CCMD psychological therapy classification"),
)  # fmt: skip
BY_NAME = {c.name: c for c in CLASSES}
DRUG = "pharmacological treatment"
# "no <treatment>": the generic words, or the name of any class of the table ("no anticoagulation", "no PPI")
_NO_TREATMENT = "|".join(["prophylaxis", "treatment", "intervention", "therapy", "medication", "drug",
                          *(name for cls in CLASSES for name in cls.names)])  # fmt: skip
PLACEBO = re.compile(
    rf"\bplacebo\w*|\bno (?:active |additional |specific )?(?:{_NO_TREATMENT})\b|\bwait(?:ing)?[- ]list\b"
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
            todo.extend(_parents(cls))
    return tuple(out)


def _parents(name: str) -> tuple[str, ...]:
    """A class's broader classes; a drug class at the top of its ATC group sits under "pharmacological treatment"."""
    cls = BY_NAME.get(name)
    if cls is None:
        return ()
    if cls.parents or name == DRUG or not cls.source.startswith("WHO"):
        return cls.parents
    return (DRUG,)


def _word_pattern(piece: str) -> re.Pattern[str]:
    """Abbreviations (capitals, an optional plural "s?") match case-sensitively, everything else ignores case."""
    bare = piece.removesuffix("s?")
    return re.compile(rf"\b(?:{piece})\b", 0 if bare.isupper() and bare.isalpha() else re.I)


@cache
def _patterns() -> list[tuple[re.Pattern[str], str, bool]]:
    """(pattern, class, names the class itself): named members first (ranibizumab is an anti-VEGF agent before
    it is a -mab), then INN stems, longest first (aripiprazole is an antipsychotic, not a -prazole), then the
    words naming classes."""
    stems = sorted(((stem, cls.name) for cls in CLASSES for stem in cls.stems), key=lambda pair: -len(pair[0]))
    out = [(_word_pattern(member), cls.name, False) for cls in CLASSES for member in cls.members]
    out += [(re.compile(rf"\b\w{{3,}}{stem}\b", re.I), cls, False) for stem, cls in stems]
    out += [(_word_pattern(name), cls.name, True) for cls in CLASSES for name in cls.names]
    return out


def agents_in(text: str) -> list[Agent]:
    """Every agent or class named in `text`, in order of first mention, one per word. A match lying inside a longer
    match ('heparin' inside 'low-molecular-weight heparin') is the longer one's word, not a mention of its own;
    'omeprazole' named beside 'esomeprazole' is its own mention."""
    matches = [(m.start(), m.end(), m.group(0).lower(), cls) for pattern, cls, _ in _patterns()
               for m in pattern.finditer(text or "")]  # fmt: skip
    found: dict[str, tuple[int, Agent]] = {}
    for start, end, word, cls in sorted(matches):
        inside = any(s <= start and end <= e and (e - s) > (end - start) for s, e, _, _ in matches)
        if word not in found and not inside:
            found[word] = (start, Agent(word, cls))
    return [agent for _, agent in sorted(found.values(), key=lambda pair: pair[0])]


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
