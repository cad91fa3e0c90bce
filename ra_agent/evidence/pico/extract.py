"""PICO extraction: record schema, rule and LLM batch extractors, JSONL runs, consistency guard and trial eligibility."""

from __future__ import annotations

import json
import logging
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ra_agent.config import Config, PicoConfig, SrConfig, TokensConfig
from ra_agent.evidence.pico import rules as pico_rules
from ra_agent.evidence.pico.design import NON_TRIAL_CLASSES, design_class, is_rct_design
from ra_agent.evidence.pico.rules import RULES_NAME
from ra_agent.fileio import atomic_write
from ra_agent.models import Paper

log = logging.getLogger(__name__)

SCHEMA_KEYS = ("P", "I", "C", "O", "StudyDesign", "PopulationAge", "SampleSize")
RCT_PUB_TYPES = frozenset({"Randomized Controlled Trial", "Randomized Controlled Trial, Veterinary"})

_SR = SrConfig()
_TOKENS = TokensConfig()


# --------------------------------------------------------------------------- the record


@dataclass
class PicoRecord:
    """The PICO fields of one paper ("" when unknown), who extracted them, and the cues behind them."""

    pmid: int
    P: str = ""
    I: str = ""  # noqa: E741 - the schema key is "I"
    C: str = ""
    O: str = ""  # noqa: E741 - the schema key is "O"
    StudyDesign: str = ""
    PopulationAge: str = ""
    SampleSize: str = ""
    extractor: str = ""
    evidence: dict[str, str] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)  # LLM values the grounding rule blanked: field -> why

    @classmethod
    def of(
        cls, pmid: int, fields: Mapping[str, str], extractor: str, evidence: dict[str, str] | None = None
    ) -> PicoRecord:
        """A record from a field → value mapping (absent fields are "")."""
        values = [fields.get(k, "") for k in SCHEMA_KEYS]
        return cls(pmid, *values, extractor=extractor, evidence=evidence or {})

    def fields(self) -> dict[str, str]:
        return {k: getattr(self, k) for k in SCHEMA_KEYS}

    def to_json(self) -> dict[str, Any]:
        """The JSONL line form: pmid, the seven schema strings, the extractor label, and `dropped` (field -> why)
        when the grounding rule blanked an LLM value."""
        line = {"pmid": self.pmid, **self.fields(), "extractor": self.extractor}
        return {**line, "dropped": dict(self.dropped)} if self.dropped else line

    @classmethod
    def from_json(cls, obj: Any) -> PicoRecord:
        """A record from its line form; raises ValueError naming the first problem."""
        if not isinstance(obj, dict):
            raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
        pmid = obj.get("pmid")
        if isinstance(pmid, bool) or not isinstance(pmid, int) or pmid <= 0:
            raise ValueError(f"'pmid' must be a positive integer, got {pmid!r}")
        missing = [k for k in (*SCHEMA_KEYS, "extractor") if k not in obj]
        if missing:
            raise ValueError(f"missing key(s) {', '.join(missing)}")
        unknown = sorted(set(obj) - {"pmid", *SCHEMA_KEYS, "extractor", "evidence", "dropped"})
        if unknown:
            raise ValueError(f"unknown key(s) {', '.join(unknown)}")
        bad = [k for k in (*SCHEMA_KEYS, "extractor") if not isinstance(obj[k], str)]
        if bad:
            raise ValueError(f"key(s) {', '.join(bad)} must be strings")
        dropped = obj.get("dropped", {})
        if not isinstance(dropped, dict) or not all(
            k in SCHEMA_KEYS and isinstance(v, str) for k, v in dropped.items()
        ):
            raise ValueError("'dropped' must map schema keys to strings")
        record = cls.of(pmid, obj, obj["extractor"])
        record.dropped = dict(dropped)
        return record


def pico_texts(record: PicoRecord) -> dict[str, str]:
    """Strings to embed per vector family (p, i, c, o, m = StudyDesign); p carries the age when P lacks it."""
    population = record.P
    if record.PopulationAge and record.PopulationAge.lower() not in population.lower():
        population = f"{population} ({record.PopulationAge})" if population else record.PopulationAge
    return {"p": population, "i": record.I, "c": record.C, "o": record.O, "m": record.StudyDesign}


# --------------------------------------------------------------------------- extractors


class Extractor(Protocol):
    """Turns papers into one PicoRecord each, in order; `name` labels every record it makes."""

    name: str
    batch_size: int

    def extract(self, papers: Sequence[Paper]) -> list[PicoRecord]: ...


class RuleExtractor:
    """Deterministic extractor over publication types, MeSH, section labels and sentence cues (no LLM)."""

    name = RULES_NAME

    def __init__(self, batch_size: int = _SR.pico_batch_size):
        self.batch_size = batch_size

    def extract(self, papers: Sequence[Paper]) -> list[PicoRecord]:
        return [self.extract_one(p) for p in papers]

    def extract_one(self, paper: Paper, label: str | None = None) -> PicoRecord:
        found = pico_rules.extract(paper)
        values = {k: v.value for k, v in found.items()}
        return PicoRecord.of(paper.pmid, values, label or self.name, {k: v.cue for k, v in found.items()})


class LearnedExtractor:
    """P, I, C and O from the CRF tagger trained on EBM-NLP labels (spans → fields, arms split by the trial's arm
    structure); StudyDesign, PopulationAge and SampleSize from the rules. Named by model and version."""

    def __init__(self, batch_size: int = _SR.pico_batch_size):
        from ra_agent.evidence.pico.learned import model_version

        self.batch_size = batch_size
        self.name = model_version()

    def extract(self, papers: Sequence[Paper]) -> list[PicoRecord]:
        return [self.extract_one(p) for p in papers]

    def extract_one(self, paper: Paper, label: str | None = None) -> PicoRecord:
        from ra_agent.evidence.pico import learned

        found = learned.extract(paper)
        values = {k: v.value for k, v in found.items()}
        return PicoRecord.of(paper.pmid, values, label or self.name, {k: v.cue for k, v in found.items()})


def default_extractor(cfg: Config | None = None) -> RuleExtractor | LearnedExtractor:
    """The extractor used when no LLM answers: `[pico] extractor` ("learned" by default, or "rules")."""
    batch = cfg.sr.pico_batch_size if cfg else _SR.pico_batch_size
    kind = cfg.pico.extractor if cfg else PicoConfig().extractor
    return RuleExtractor(batch_size=batch) if kind == "rules" else LearnedExtractor(batch_size=batch)


def pico_code_version() -> str:
    """What the PICO records depend on: the learned model's name and version, the version of the code that turns its
    spans into fields (`learned.spans_version`) and the rules' name."""
    from ra_agent.evidence.pico.learned import model_version, spans_version

    return f"{model_version()}+{spans_version()}+{RULES_NAME}"


# --------------------------------------------------------------------------- consistency guard and eligibility


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def consistency_warnings(records: Iterable[PicoRecord], papers: Iterable[Paper] = ()) -> list[str]:
    """Records with identical P/I/O but conflicting StudyDesign classes, flagged for manual audit."""
    titles = {p.pmid: p.title for p in papers}
    groups: dict[tuple[str, str, str], list[PicoRecord]] = defaultdict(list)
    for r in records:
        key = (_norm(r.P), _norm(r.I), _norm(r.O))
        if all(key) and r.StudyDesign.strip():
            groups[key].append(r)
    warnings = []
    for group in groups.values():
        classes = sorted({design_class(r.StudyDesign) for r in group})
        if len(classes) > 1:
            shown = "; ".join(
                f"{r.pmid} {r.StudyDesign!r}" + (f" '{titles[r.pmid][:60]}'" if r.pmid in titles else "") for r in group
            )
            warnings.append(f"identical P/I/O but conflicting StudyDesign ({' vs '.join(classes)}): {shown}")
    for w in warnings:
        log.warning("PICO consistency guard: %s", w)
    return warnings


def is_rct(paper: Paper | None, record: PicoRecord | None) -> bool:
    """Randomised by publication type or by the extracted StudyDesign, unless the StudyDesign names a publication
    that reports no trial of its own (review, meta-analysis, protocol, editorial, letter, comment, guideline, case
    report), whatever its publication types say."""
    if record is not None and design_class(record.StudyDesign) in NON_TRIAL_CLASSES:
        return False
    by_type = paper is not None and bool(RCT_PUB_TYPES & set(paper.pub_types))
    return by_type or (record is not None and is_rct_design(record.StudyDesign))


def is_eligible_trial(paper: Paper | None, record: PicoRecord | None) -> bool:
    """An RCT (publication type or StudyDesign) whose P, I and O are all present."""
    if record is None or not is_rct(paper, record):
        return False
    return all(getattr(record, k).strip() for k in ("P", "I", "O"))


def count_eligible(papers: Iterable[Paper], records: Iterable[PicoRecord] | Mapping[int, PicoRecord]) -> int:
    """Eligible trials among `papers` (feeds the eligible_trials cluster metric); papers without a record don't count."""
    rows = records.values() if isinstance(records, Mapping) else records
    by_pmid = {r.pmid: r for r in rows}
    return sum(is_eligible_trial(p, by_pmid.get(p.pmid)) for p in papers)


# --------------------------------------------------------------------------- runs and JSONL files


class PicoFileError(ValueError):
    """A PICO JSONL file has a bad line; the message names the file and line number."""


@dataclass
class PicoRunResult:
    status: str  # "ok" | "declined"
    extractor: str
    papers: int
    extracted: int = 0
    path: str | None = None
    fill_rates: dict[str, float] = field(default_factory=dict)
    rct: int = 0
    eligible: int = 0
    warnings: list[str] = field(default_factory=list)
    extractor_counts: dict[str, int] = field(default_factory=dict)  # records per extractor label (shows fallbacks)
    llm: dict[str, Any] = field(default_factory=dict)  # an LLM extractor's calls: mode(s), tokens, seconds, papers
    dropped_values: int = 0  # LLM values the grounding rule blanked

    def metadata(self) -> dict[str, Any]:
        """Flat values for asset metadata and tool results."""
        return {
            "status": self.status,
            "extractor": self.extractor,
            "papers": self.papers,
            "extracted": self.extracted,
            "path": self.path or "",
            "rct": self.rct,
            "eligible_trials": self.eligible,
            "warnings": len(self.warnings),
            **{f"fill_{k}": round(v, 3) for k, v in self.fill_rates.items()},
            **({**self.llm, "llm_values_dropped": self.dropped_values} if self.llm else {}),
        }


def fill_rates(records: Sequence[PicoRecord]) -> dict[str, float]:
    """Share of records with a non-empty value, per schema field."""
    n = len(records)
    return {k: (sum(bool(getattr(r, k).strip()) for r in records) / n if n else 0.0) for k in SCHEMA_KEYS}


def run_pico(
    papers: Iterable[Paper],
    extractor: Extractor,
    out_path: str | Path,
    *,
    confirm: Callable[[int], bool] | None = None,
    confirm_above: int = _SR.pico_confirm_above,
    progress: Callable[[int, int], None] | None = None,
) -> PicoRunResult:
    """Extract PICO for each distinct paper and write `out_path` atomically, one validated line per PMID.

    Above `confirm_above` papers, `confirm(n)` is asked first (tool contract: confirmation above 800);
    a refusal extracts and writes nothing. `progress(done, total)` is called after each batch.
    """
    first: dict[int, Paper] = {}
    for paper in papers:
        first.setdefault(paper.pmid, paper)
    unique = list(first.values())
    n = len(unique)
    if n > confirm_above and confirm is not None and not confirm(n):
        log.info("run_pico: %d papers > %d and the run was not confirmed; nothing extracted", n, confirm_above)
        return PicoRunResult(status="declined", extractor=extractor.name, papers=n)
    records: list[PicoRecord] = []
    step = max(1, getattr(extractor, "batch_size", _SR.pico_batch_size))
    for start in range(0, n, step):
        records.extend(extractor.extract(unique[start : start + step]))
        if progress:
            progress(min(start + step, n), n)
    records = _one_per_paper(unique, records, extractor.name)
    write_pico(out_path, records)
    by_pmid = {r.pmid: r for r in records}
    summary: Any = getattr(extractor, "call_summary", None)  # an LLM extractor says how it asked
    llm: dict[str, Any] = summary() if summary is not None else {}
    result = PicoRunResult(
        status="ok",
        extractor=extractor.name,
        papers=n,
        extracted=sum(any(r.fields().values()) for r in records),
        path=str(out_path),
        fill_rates=fill_rates(records),
        rct=sum(is_rct(p, by_pmid[p.pmid]) for p in unique),
        eligible=count_eligible(unique, by_pmid),
        warnings=consistency_warnings(records, unique),
        extractor_counts=dict(Counter(r.extractor for r in records)),
        llm=llm,
        dropped_values=sum(len(r.dropped) for r in records),
    )
    log.info("run_pico: %d papers -> %s (%s; %d RCT, %d eligible, %d warnings)", n, out_path, extractor.name,
             result.rct, result.eligible, len(result.warnings))  # fmt: skip
    return result


def _one_per_paper(papers: Sequence[Paper], records: Iterable[PicoRecord], name: str) -> list[PicoRecord]:
    by_pmid: dict[int, PicoRecord] = {}
    for r in records:
        by_pmid.setdefault(r.pmid, r)
    missing = [p.pmid for p in papers if p.pmid not in by_pmid]
    if missing:
        log.warning("%s returned no record for %d PMID(s); written with empty fields", name, len(missing))
    return [by_pmid.get(p.pmid) or PicoRecord(pmid=p.pmid, extractor=f"{name} (no record)") for p in papers]


def write_pico(path: str | Path, records: Iterable[PicoRecord]) -> None:
    """Write records as JSONL via a temporary file and os.replace (a crash leaves the old file intact)."""
    lines = []
    for r in records:
        line = json.dumps(r.to_json(), ensure_ascii=False)
        PicoRecord.from_json(json.loads(line))  # never write a line read_pico would reject
        lines.append(line + "\n")
    atomic_write(Path(path), "".join(lines))


def read_pico(path: str | Path) -> list[PicoRecord]:
    """Every record of a PICO JSONL file; a malformed line or a repeated PMID raises PicoFileError."""
    path = Path(path)
    records: list[PicoRecord] = []
    seen: set[int] = set()
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            try:
                record = PicoRecord.from_json(json.loads(line))
            except ValueError as exc:  # json.JSONDecodeError is a ValueError
                raise PicoFileError(f"{path}:{number}: {exc}") from exc
            if record.pmid in seen:
                raise PicoFileError(f"{path}:{number}: PMID {record.pmid} appears more than once")
            seen.add(record.pmid)
            records.append(record)
    return records


__all__ = [
    "SCHEMA_KEYS",
    "Extractor",
    "LearnedExtractor",
    "PicoFileError",
    "PicoRecord",
    "PicoRunResult",
    "RuleExtractor",
    "consistency_warnings",
    "count_eligible",
    "default_extractor",
    "design_class",
    "fill_rates",
    "is_eligible_trial",
    "is_rct",
    "is_rct_design",
    "pico_code_version",
    "pico_texts",
    "read_pico",
    "run_pico",
    "write_pico",
]
