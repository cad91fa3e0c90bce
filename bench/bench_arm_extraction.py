"""Benchmark: arm-level data extraction (rules:arm-numbers-v5.1) against hand-made gold sets, next to named baselines.

Fields other than reflux, first the fresh sets, newest first (fields_fresh3.tsv: calcium channel blockers and
bladder antimuscarinics, read before the third round of rules (v5) and scored once on it; fields_fresh.tsv:
atypical antipsychotics and NSAIDs, read before the second round (v4, not landed) and scored on v3 and v4, then v5),
then fields_dev.tsv / fields_heldout.tsv over fields_records.csv (anticoagulation in cancer, triptans for migraine,
oral hypoglycaemics in type 2 diabetes; read by hand before the v3 rules were written, split by sorted PMID per
field): the held-out half (read by no round's rules), then the development half (every round was written on it),
overall and per field, each beside the rules of commit --before run in the same run from an archive of that commit
(default 426577e, rules:arm-numbers-v3; b596e4c holds the second round's v4, 0f1a411 the rules before issue 37).
Then the reflux sets:

Gold (tests/fixtures/arm_data/, see PROVENANCE.md):
- heldout2.tsv: the fresh held-out batch, 43 demo trial abstracts read by hand before any extractor ran on them;
  reported first, and the figure to quote;
- gold.tsv: 40 demo abstracts split once by sorted PMID: even positions the development half (the rules were
  tuned on it), odd positions the first held-out half, compromised (the rules were changed after a draft showed
  three of its abstracts; PROVENANCE.md gives its clean first figure).
A gold datum counts as found when the extractor returns, for the same PMID, a datum whose drug is named in the gold
arm label, at the same time point (weeks), with the same events and total. Precision: share of extracted data that
match a gold datum (the gold lists every efficacy result the abstract states with both numbers, so an unmatched
datum is a wrong or unsupported one). Outcome: among the found data, the share whose outcome class (healing,
relapse, remission, eradication, symptom relief, other; `outcome_class_of` reads the gold label by keywords) is
the extractor's.

Baselines (same run):
- count pairs: every "x/y", "x of y" in a sentence, given the drug named nearest to it and the sentence's first time
  point; percentages are not converted;
- count pairs + percent × n: also every percentage times the size the abstract states for the nearest drug's arm
  ("drug ... (n = 188)", "188 patients received drug"), rounded, without checking that the count reproduces the
  printed percentage or that the sentence is not per-protocol.

    python bench/bench_arm_extraction.py [--csv data/demo/Cohen_2006_ProtonPumpInhibitors.csv] [--show-misses]
"""

from __future__ import annotations

import argparse
import csv
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ra_agent.evidence.pico.text import sections_of, sentences
from ra_agent.evidence.synthesis.compare import outcome_key
from ra_agent.evidence.synthesis.extract import DRUG, EXTRACTOR, extract_arm_data, time_points
from ra_agent.models import Paper

ROOT = Path(__file__).resolve().parents[1]
GOLD_DIR = ROOT / "tests" / "fixtures" / "arm_data"
GOLD = GOLD_DIR / "gold.tsv"
HELDOUT2 = GOLD_DIR / "heldout2.tsv"

Key = tuple[int, str, float | None, int, int]  # (pmid, drug, weeks, events, total)


@dataclass(frozen=True)
class GoldDatum:
    pmid: int
    arm: str  # "omeprazole 20 mg + amoxicillin + clarithromycin"
    outcome: str
    weeks: float | None
    events: int
    total: int

    @property
    def drugs(self) -> set[str]:
        return {w.lower() for w in re.findall(r"[A-Za-z][\w/-]*", self.arm)}

    def matches(self, key: Key) -> bool:
        pmid, drug, weeks, events, total = key
        return (pmid, weeks, events, total) == (self.pmid, self.weeks, self.events, self.total) and drug in self.drugs


Extracted = tuple[Key, str]  # a datum's key and its outcome class


def load_gold(path: Path = GOLD) -> dict[int, list[GoldDatum]]:
    """PMID → its gold data (an empty list: the abstract states no result with both numbers). Each line: pmid, arm,
    outcome, weeks ("-": none stated), events, total, tab-separated; a line with arm "-" lists an abstract without
    data; "#" lines are comments. A malformed line raises ValueError naming the file and line."""
    gold: dict[int, list[GoldDatum]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            pmid, arm, outcome, weeks, events, total = line.split("\t")
            rows = gold.setdefault(int(pmid), [])
            if arm != "-":
                rows.append(GoldDatum(int(pmid), arm, outcome, None if weeks == "-" else float(weeks), int(events),
                                      int(total)))  # fmt: skip
        except ValueError as exc:
            raise ValueError(f"{path}:{n}: expected pmid, arm, outcome, weeks, events, total ({exc})") from exc
    return gold


def split(pmids: Iterable[int]) -> tuple[list[int], list[int]]:
    """(development, held-out): even and odd positions of the sorted PMIDs."""
    ordered = sorted(pmids)
    return ordered[0::2], ordered[1::2]


# Outcome classes of gold labels, by keyword, first match wins (independent of the extractor's own regexes).
OUTCOME_CLASSES = (
    ("eradication", r"eradicat|\bcure|clearance|pylori[- ]negative"),
    ("relapse", r"relapse|recurren"),
    ("remission", r"remission|maintained|remained healed"),
    ("healing", r"heal"),
    ("symptom relief", r"relief|resol|improve|free|heartburn|pain|well-being|symptom"),
)


def outcome_class_of(label: str) -> str:
    """The outcome class a gold label names ("ulcer healing (per protocol)" → "healing"), else "other"."""
    return next((name for name, rx in OUTCOME_CLASSES if re.search(rx, label, re.I)), "other")


def load_papers(csv_path: Path, pmids: set[int]) -> dict[int, Paper]:
    out = {}
    with csv_path.open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            pmid = int(row["pubmedID"])
            if pmid in pmids:
                out[pmid] = Paper(pmid=pmid, title=row["title"], abstract=row["abstract"])
    return out


def ra_rules(paper: Paper) -> list[Extracted]:
    """The rules' dichotomous data, adverse events left out (the reflux gold's protocol does not list them)."""
    return [((d.pmid, d.drug, d.weeks, d.events, d.total), outcome_key(d.outcome))
            for d in extract_arm_data(paper) if not d.continuous and d.outcome != "adverse events"]  # fmt: skip


_PAIR = re.compile(r"\b(\d+)\s*(?:/|out of|of)\s*(?:the\s+)?(\d+)\b")
_PERCENT = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*%")
_DRUG = re.compile(rf"\b{DRUG}\b", re.I)


def _units(paper: Paper) -> list[str]:
    return [s for section in sections_of(paper) for s in sentences(section.text)]


def _nearest_drug(sentence: str, start: int, end: int) -> str | None:
    drugs = sorted(_DRUG.finditer(sentence), key=lambda d: min(abs(d.start() - end), abs(start - d.end())))
    return drugs[0].group(0).lower() if drugs else None


def _first_weeks(sentence: str) -> float | None:
    times = time_points(sentence)
    return times[0][1] if times else None


def baseline(paper: Paper) -> list[Extracted]:
    """Count pairs with the nearest drug (see the module docstring)."""
    out = []
    for s in _units(paper):
        for m in _PAIR.finditer(s):
            drug = _nearest_drug(s, m.start(), m.end())
            if drug and int(m.group(1)) <= int(m.group(2)):
                out.append(((paper.pmid, drug, _first_weeks(s), int(m.group(1)), int(m.group(2))), "other"))
    return out


def _arm_sizes(text: str) -> dict[str, int]:
    """Drug → the first size the abstract states for it: "drug ... (n = 188)" or "188 patients received drug"."""
    sizes: dict[str, int] = {}
    for m in re.finditer(rf"\b({DRUG})\b[^.;()]{{0,40}}\(\s*n\s*=\s*(\d+)", text, re.I):
        sizes.setdefault(m.group(1).lower(), int(m.group(2)))
    for m in re.finditer(rf"\b(\d+)\s+(?:patients|subjects)\s+(?:received|were given|taking|on)\s+(?:\S+\s+){{0,3}}?({DRUG})\b",
                         text, re.I):  # fmt: skip
        sizes.setdefault(m.group(2).lower(), int(m.group(1)))
    return sizes


def baseline_percent(paper: Paper) -> list[Extracted]:
    """Count pairs, and every percentage times the stated size of the nearest drug's arm (see the module docstring)."""
    out = baseline(paper)
    sizes = _arm_sizes(paper.abstract)
    for s in _units(paper):
        for m in _PERCENT.finditer(s):
            drug = _nearest_drug(s, m.start(), m.end())
            if drug and drug in sizes:
                n = sizes[drug]
                out.append(((paper.pmid, drug, _first_weeks(s), round(float(m.group(1)) * n / 100), n), "other"))
    return out


@dataclass(frozen=True)
class Score:
    found: int
    gold: int
    correct: int
    extracted: int
    outcome_right: int  # found data whose outcome class is the gold's

    @property
    def recall(self) -> float:
        return self.found / self.gold if self.gold else 0.0

    @property
    def precision(self) -> float:
        return self.correct / self.extracted if self.extracted else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def score(fn: Callable[[Paper], list[Extracted]], papers: dict[int, Paper], gold: dict[int, list[GoldDatum]],
          pmids: Iterable[int], show: Callable[[str], None] | None = None) -> Score:  # fmt: skip
    """Recall, precision and outcome agreement of `fn` on `pmids` (each extracted key counted once)."""
    found = gold_n = correct = extracted = outcome_right = 0
    for pmid in pmids:
        got = dict(fn(papers[pmid]))  # key → outcome class
        rows = gold[pmid]
        gold_n += len(rows)
        extracted += len(got)
        correct += sum(any(g.matches(k) for g in rows) for k in got)
        for g in rows:
            hit = [k for k in got if g.matches(k)]
            found += bool(hit)
            outcome_right += bool(hit) and any(got[k] == outcome_class_of(g.outcome) for k in hit)
            if show and not hit:
                show(f"    miss  {g}")
        for k in got:
            if show and not any(g.matches(k) for g in rows):
                show(f"    extra {k}")
    return Score(found, gold_n, correct, extracted, outcome_right)


def line(name: str, s: Score, with_outcome: bool) -> str:
    text = (f"  {name:36s} recall {s.recall:6.1%} ({s.found}/{s.gold})  precision {s.precision:6.1%} "
            f"({s.correct}/{s.extracted})  F1 {s.f1:.3f}")  # fmt: skip
    if with_outcome:
        text += f"  outcome class right {s.outcome_right}/{s.found}"
    return text


EXTRACTORS = (
    (f"ra {EXTRACTOR}", ra_rules, True),
    ("baseline: count pairs", baseline, False),
    ("baseline: count pairs + percent x n", baseline_percent, False),
)


# ----------------------------------------------------------------------------- fields other than reflux

FIELDS_DEV = GOLD_DIR / "fields_dev.tsv"
FIELDS_HELDOUT = GOLD_DIR / "fields_heldout.tsv"
FIELDS_RECORDS = GOLD_DIR / "fields_records.csv"
# fresh gold, each read before a round of rules changed and scored once after it (PROVENANCE.md): (label, gold,
# records), newest first
FRESH = (
    ("fresh fields of the third round (fields_fresh3.tsv)", GOLD_DIR / "fields_fresh3.tsv",
     GOLD_DIR / "fields_fresh3_records.csv"),
    ("fresh fields of the second round (fields_fresh.tsv)", GOLD_DIR / "fields_fresh.tsv",
     GOLD_DIR / "fields_fresh_records.csv"),
)  # fmt: skip
# Each field's review question as a reviewer states it: the intervention classes (evidence.classes) whose arms are
# the question's intervention; every other arm (placebo, no treatment, insulin alone, acupuncture) is a comparator.
FIELD_QUESTIONS = {
    "anticoagulation in cancer": ("anticoagulant",),
    "triptans for migraine": ("triptan",),
    "oral hypoglycaemics in type 2 diabetes": ("biguanide", "sulfonylurea", "thiazolidinedione", "meglitinide",
                                               "alpha-glucosidase inhibitor", "DPP-4 inhibitor", "SGLT2 inhibitor"),
    "atypical antipsychotics": ("atypical antipsychotic",),
    "NSAIDs": ("non-steroidal anti-inflammatory drug",),  # COX-2 inhibitors included (evidence.classes lineage)
    "calcium channel blockers": ("calcium channel blocker",),
    "urinary incontinence drugs": ("bladder antimuscarinic",),
}  # fmt: skip
BEFORE_REF = "426577e"  # rules:arm-numbers-v3 (b596e4c: the second round's v4, not landed; 0f1a411: before issue 37)
_TIME_UNIT = {"h": 1 / 168, "d": 1 / 7, "wk": 1.0, "mo": 52 / 12, "y": 52.0}
_ARM_STOP = frozenset("the and with plus group groups arm arms daily once twice dose doses patients therapy treatment "
                      "tablet tablets oral alone mg iu".split())  # fmt: skip
_NEGATED = re.compile(r"^(?:no|without|not)\b", re.I)


def time_weeks(text: str) -> float | None:
    """ "2h", "7d", "6wk", "3mo", "1y" → weeks (rounded to 0.1, as the extractor rounds; hours to 0.001); "-" → None."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(h|d|wk|mo|y)", text)
    if not m:
        return None
    weeks = float(m.group(1)) * _TIME_UNIT[m.group(2)]
    return round(weeks, 3 if m.group(2) == "h" else 1)


@dataclass(frozen=True)
class FieldDatum:
    """One hand-read arm datum of fields_*.tsv (see PROVENANCE.md)."""

    pmid: int
    field: str
    arm: str
    role: str  # "I" (receives the question's intervention) or "C"
    outcome: str
    weeks: float | None
    population: str  # "ITT", "PP" or "" (not stated)
    events: int | None  # None: a continuous datum
    total: int
    mean: float | None
    sd: float | None  # the SD (an SE times the square root of n), or the printed "±" value when unlabelled
    dispersion: str  # "SD", "SE", "±" or "" (dichotomous)


@dataclass(frozen=True)
class Got:
    """An extracted datum as the field scoring reads it (from an ArmDatum's dict, of this tree or of another commit)."""

    pmid: int
    arm: str
    events: int | None
    total: int
    mean: float | None
    sd: float | None  # the SD, or the printed "±" value when the abstract does not say what it is
    weeks: float | None
    analysis: str = ""
    role: str = ""

    @classmethod
    def of(cls, d: dict, role: str = "") -> Got:
        continuous = d.get("mean") is not None
        sd = d.get("sd") if d.get("sd") is not None else d.get("spread")
        return cls(int(d["pmid"]), str(d["arm"]), None if continuous else int(d["events"]), int(d["total"]),
                   d.get("mean"), sd, d.get("weeks"), str(d.get("analysis", "")), role)  # fmt: skip


def load_fields_gold(path: Path) -> dict[int, list[FieldDatum]]:
    """PMID → its gold data from a fields_*.tsv (an empty list: no arm datum); a malformed line raises ValueError
    naming the file and line."""
    gold: dict[int, list[FieldDatum]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            pmid, field, arm, role, outcome, time, pop, events, total, mean, spread, disp, _quote = line.split("\t")
            rows = gold.setdefault(int(pmid), [])
            if arm == "-":
                continue
            value = None if spread == "-" else float(spread) * (math.sqrt(int(total)) if disp == "SE" else 1.0)
            rows.append(FieldDatum(int(pmid), field, arm, role, outcome, time_weeks(time), "" if pop == "-" else pop,
                                   None if events == "-" else int(events), int(total),
                                   None if mean == "-" else float(mean), value, "" if disp == "-" else disp))  # fmt: skip
        except ValueError as exc:
            raise ValueError(f"{path}:{n}: expected the 13 columns of PROVENANCE.md ({exc})") from exc
    return gold


def load_field_records(path: Path = FIELDS_RECORDS) -> dict[int, tuple[str, Paper]]:
    csv.field_size_limit(10**7)
    with path.open(encoding="utf-8", newline="") as fh:
        return {int(r["pmid"]): (r["field"], Paper(pmid=int(r["pmid"]), title=r["title"], abstract=r["abstract"]))
                for r in csv.DictReader(fh)}  # fmt: skip


def arm_words(label: str) -> set[str]:
    """The distinctive words of an arm label (lower-cased, three letters or more, or a capitalised abbreviation)."""
    words = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z-]{2,}|\b[A-Z]{2,}\b", label)}
    return words - _ARM_STOP


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 0.006 + 1e-3 * abs(b)


def same_numbers(g: FieldDatum, x: Got) -> bool:
    if g.pmid != x.pmid or g.total != x.total or (g.events is None) != (x.events is None):
        return False
    if g.events is not None:
        return g.events == x.events
    return x.mean is not None and x.sd is not None and g.mean is not None and g.sd is not None and \
        _close(x.mean, g.mean) and _close(x.sd, g.sd)  # fmt: skip


def field_matches(rows: list[FieldDatum], x: Got) -> list[FieldDatum]:
    """The gold data an extracted datum stands for: same numbers, an arm sharing a distinctive word and the same
    negation ("no warfarin" is not "warfarin"); of several, those sharing the most words."""
    words = arm_words(x.arm)
    negated = bool(_NEGATED.match(x.arm))
    found = [(len(words & arm_words(g.arm)), g) for g in rows
             if same_numbers(g, x) and words & arm_words(g.arm) and bool(_NEGATED.match(g.arm)) == negated]  # fmt: skip
    best = max((n for n, _ in found), default=0)
    return [g for n, g in found if n == best]


@dataclass(frozen=True)
class FieldScore(Score):
    role_right: int = 0  # found data whose role (I/C) is the gold's
    analysis_right: int = 0  # found data whose analysis set is the gold's (both "" when the abstract does not say)
    time_right: int = 0  # found data at the gold's time point
    continuous_found: int = 0
    continuous_gold: int = 0


def score_fields(got: dict[int, list[Got]], gold: dict[int, list[FieldDatum]], pmids: Iterable[int],
                 show: Callable[[str], None] | None = None) -> FieldScore:  # fmt: skip
    found = gold_n = correct = extracted = role = analysis = time = cont_found = cont_gold = 0
    for pmid in pmids:
        rows, xs = gold[pmid], got.get(pmid, [])
        gold_n += len(rows)
        cont_gold += sum(g.events is None for g in rows)
        extracted += len(xs)
        hits = {id(x): field_matches(rows, x) for x in xs}
        correct += sum(bool(h) for h in hits.values())
        for g in rows:
            by = [x for x in xs if any(h is g for h in hits[id(x)])]
            found += bool(by)
            cont_found += bool(by) and g.events is None
            role += any(x.role == g.role for x in by)
            analysis += any(x.analysis == g.population for x in by)
            time += any(x.weeks == g.weeks for x in by)
            if show and not by:
                show(f"    miss  {pmid} {g.arm!r} {g.outcome!r} {g.events}/{g.total} mean {g.mean} sd {g.sd}")
        for x in xs:
            if show and not hits[id(x)]:
                show(f"    extra {pmid} {x.arm!r} {x.events}/{x.total} mean {x.mean} sd {x.sd} weeks {x.weeks}")
    return FieldScore(found, gold_n, correct, extracted, 0, role, analysis, time, cont_found, cont_gold)


def field_line(name: str, s: FieldScore, details: bool) -> str:
    text = (f"  {name:44s} recall {s.recall:6.1%} ({s.found}/{s.gold})  precision {s.precision:6.1%} "
            f"({s.correct}/{s.extracted})  continuous found {s.continuous_found}/{s.continuous_gold}")  # fmt: skip
    if details:
        text += f"  role right {s.role_right}/{s.found}  ITT/PP right {s.analysis_right}/{s.found}  " \
                f"time right {s.time_right}/{s.found}"  # fmt: skip
    return text


def current_fields(records: dict[int, tuple[str, Paper]]) -> dict[int, list[Got]]:
    """This tree's rules on each record, every datum with its role in the field's question."""
    from ra_agent.evidence.synthesis import extract as now

    role_of = getattr(now, "arm_role", None)  # the tree's role reader (evidence.classes over the arm label)
    out: dict[int, list[Got]] = {}
    for pmid, (field, paper) in records.items():
        out[pmid] = [Got.of(d.as_dict(), role_of(d.arm, FIELD_QUESTIONS[field]) if role_of else "")
                     for d in now.extract_arm_data(paper)]  # fmt: skip
    return out


# The rules of another commit ("before") on the same records, run by that commit's own code in a subprocess over an
# archive of its tree: prints each record's data (ArmDatum.as_dict) as JSON.
BEFORE = r"""
import csv, json, sys
tree, records = sys.argv[1:3]
from ra_agent.models import Paper
from ra_agent.evidence.synthesis.extract import extract_arm_data
csv.field_size_limit(10**7)
out = {}
with open(records, encoding="utf-8", newline="") as fh:
    for r in csv.DictReader(fh):
        paper = Paper(pmid=int(r["pmid"]), title=r["title"], abstract=r["abstract"])
        out[r["pmid"]] = [d.as_dict() for d in extract_arm_data(paper)]
print("BEFORE-JSON " + json.dumps(out))
"""


def before_fields(ref: str, records: Path = FIELDS_RECORDS) -> dict[int, list[Got]] | None:
    """The data the rules at commit `ref` extract from the records (None when the commit is not in this clone)."""
    from at_commit import run_at_commit  # bench/, beside this script

    out = run_at_commit(ref, BEFORE, [str(records)], "  before")
    return None if out is None else {int(k): [Got.of(d) for d in v] for k, v in out.items()}


def report_fields(before_ref: str | None, *, heldout: bool, show_misses: bool) -> None:
    """The fields' gold: held-out half first (when asked), then the development half; overall, then per field; this
    tree's rules beside the rules at `before_ref`, measured in this run."""
    records = load_field_records()
    now = current_fields(records)
    before = before_fields(before_ref) if before_ref else None
    sets = [("held-out half (fields_heldout.tsv)", FIELDS_HELDOUT, False, now, before)] if heldout else []
    for label, gold_path, records_path in reversed(FRESH) if heldout else ():  # the fresh fields first, newest first
        fresh_records = load_field_records(records_path)
        fresh_before = before_fields(before_ref, records_path) if before_ref else None
        records = {**records, **fresh_records}
        sets.insert(0, (label, gold_path, False, current_fields(fresh_records), fresh_before))
    sets.append(("development half (fields_dev.tsv)", FIELDS_DEV, show_misses, now, before))
    for label, path, show, now, before in sets:
        gold = load_fields_gold(path)
        n = sum(map(len, gold.values()))
        print(f"fields other than reflux, {label}: {len(gold)} abstracts, {n} gold arm data "
              f"({sum(not v for v in gold.values())} abstracts state none with both numbers)")  # fmt: skip
        for field in ("", *FIELD_QUESTIONS):
            pmids = sorted(p for p in gold if not field or records[p][0] == field)
            if field and not pmids:
                continue
            if field:
                print(f"   {field}: {len(pmids)} abstracts, {sum(len(gold[p]) for p in pmids)} gold data")
            print(field_line(f"ra {EXTRACTOR} (this tree)", score_fields(now, gold, pmids, print if show and not field
                                                                           else None), True))  # fmt: skip
            if before is not None:
                print(field_line(f"ra rules at {before_ref}", score_fields(before, gold, pmids), False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv")
    ap.add_argument("--show-misses", action="store_true", help="list the misses and extras of the development halves")
    ap.add_argument("--before", default=BEFORE_REF, help="the commit whose rules are measured beside (default "
                    f"{BEFORE_REF}, rules:arm-numbers-v3); '' for none")  # fmt: skip
    ap.add_argument("--dev-only", action="store_true", help="skip the held-out sets (while the rules change)")
    args = ap.parse_args()
    report_fields(args.before or None, heldout=not args.dev_only, show_misses=args.show_misses)
    gold, fresh = load_gold(GOLD), load_gold(HELDOUT2)
    papers = load_papers(args.csv, set(gold) | set(fresh))
    dev, held = split(gold)
    sets = [
        ("fresh held-out batch (heldout2.tsv, 2026-11-26)", fresh, sorted(fresh), False),
        ("first held-out half of gold.tsv (compromised, see PROVENANCE.md)", gold, held, False),
        ("development half of gold.tsv", gold, dev, args.show_misses),
    ]
    for label, source, pmids, show in sets[2:] if args.dev_only else sets:
        n = sum(len(source[p]) for p in pmids)
        print(f"reflux, {label}: {len(pmids)} abstracts, {n} gold arm data ({sum(not source[p] for p in pmids)} "
              "abstracts state none with both numbers)")  # fmt: skip
        for name, fn, with_outcome in EXTRACTORS:
            print(line(name, score(fn, papers, source, pmids, print if show and with_outcome else None), with_outcome))


if __name__ == "__main__":
    main()
