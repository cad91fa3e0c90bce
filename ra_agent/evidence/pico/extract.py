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

import json5

from ra_agent.config import Config, PicoConfig, SrConfig, TokensConfig
from ra_agent.embed.tokens import count_tokens, prompt_budget, truncate_tokens
from ra_agent.evidence.pico import rules as pico_rules
from ra_agent.evidence.pico.design import NON_TRIAL_CLASSES, design_class, is_rct_design
from ra_agent.evidence.pico.rules import RULES_NAME
from ra_agent.fileio import atomic_write
from ra_agent.llm.base import BrainError
from ra_agent.llm.protocol import repair_messages
from ra_agent.models import Paper

log = logging.getLogger(__name__)

SCHEMA_KEYS = ("P", "I", "C", "O", "StudyDesign", "PopulationAge", "SampleSize")
RCT_PUB_TYPES = frozenset({"Randomized Controlled Trial", "Randomized Controlled Trial, Veterinary"})
FIX_JSON_PROMPT = "FIX JSON ONLY: return only the valid JSON array for the previous message"
MAX_FIELD_CHARS = 600
ABSTRACT_TOKEN_CAP = 800  # one abstract never takes more of a batch prompt than this
REPLY_TOKENS_PER_RECORD = 90  # reply room reserved per abstract inside the token budget

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
        """The JSONL line form: pmid, the seven schema strings and the extractor label."""
        return {"pmid": self.pmid, **self.fields(), "extractor": self.extractor}

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
        unknown = sorted(set(obj) - {"pmid", *SCHEMA_KEYS, "extractor", "evidence"})
        if unknown:
            raise ValueError(f"unknown key(s) {', '.join(unknown)}")
        bad = [k for k in (*SCHEMA_KEYS, "extractor") if not isinstance(obj[k], str)]
        if bad:
            raise ValueError(f"key(s) {', '.join(bad)} must be strings")
        return cls.of(pmid, obj, obj["extractor"])


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


class ChatBrain(Protocol):
    """The part of ra_agent.llm.base.Brain the LLM extractor uses."""

    name: str

    def chat(self, messages: list[dict[str, str]]) -> str: ...


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


SYSTEM_PROMPT = (
    "You extract PICO fields from biomedical abstracts for a systematic review. "
    "You answer with one JSON array and nothing else."
)
USER_INSTRUCTIONS = """For each abstract below give one JSON object with exactly these keys:
"pmid" (the number given), "P" (population: condition, setting, age and number), "I" (intervention incl. dose),
"C" (comparator; "" if none), "O" (primary outcome), "StudyDesign" ("RCT", "controlled trial", "cohort",
"case-control", "cross-sectional", "case report", "systematic review", "meta-analysis", "narrative review", ...
followed by qualifiers such as double-blind, placebo-controlled, crossover, multicentre),
"PopulationAge" (ages or age group), "SampleSize" (participants randomised or enrolled, digits only).
All values are strings. Use "" when the abstract does not say; never guess.
Return ONLY a JSON array with exactly one object per PMID, in the order given."""


class LlmExtractor:
    """Batch PICO extraction through a chat brain, with one JSON repair turn and a labelled rule fallback."""

    def __init__(
        self,
        brain: ChatBrain,
        *,
        batch_size: int = _SR.pico_batch_size,
        token_budget: int = _TOKENS.token_soft_cap,
        fallback: RuleExtractor | LearnedExtractor | None = None,
    ):
        self.brain = brain
        self.name = brain.name
        self.batch_size = batch_size
        self.token_budget = token_budget
        self.fallback = fallback or default_extractor()
        self.failures: list[str] = []

    @classmethod
    def from_config(cls, brain: ChatBrain, cfg: Config) -> LlmExtractor:
        """Batches sized to the prompt budget: token_soft_cap, with the reply's room kept free under num_ctx."""
        return cls(brain, batch_size=cfg.sr.pico_batch_size, token_budget=prompt_budget(cfg),
                   fallback=default_extractor(cfg))  # fmt: skip

    def extract(self, papers: Sequence[Paper]) -> list[PicoRecord]:
        records: list[PicoRecord] = []
        for batch in self.batches(papers):
            records.extend(self.extract_batch([p for p, _ in batch], [t for _, t in batch]))
        return records

    def batches(self, papers: Sequence[Paper]) -> list[list[tuple[Paper, str]]]:
        """(paper, prompt text) groups of at most batch_size papers whose prompt fits token_budget."""
        overhead = count_tokens(SYSTEM_PROMPT + USER_INSTRUCTIONS)
        groups: list[list[tuple[Paper, str]]] = []
        current: list[tuple[Paper, str]] = []
        used = overhead
        for paper in papers:
            text = truncate_tokens(paper_prompt_text(paper), ABSTRACT_TOKEN_CAP)
            cost = count_tokens(text) + REPLY_TOKENS_PER_RECORD
            if current and (len(current) >= self.batch_size or used + cost > self.token_budget):
                groups.append(current)
                current, used = [], overhead
            current.append((paper, text))
            used += cost
        if current:
            groups.append(current)
        return groups

    def messages(self, texts: Sequence[str]) -> list[dict[str, str]]:
        user = USER_INSTRUCTIONS + "\n\n" + "\n\n".join(texts)
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]

    def extract_batch(self, papers: Sequence[Paper], texts: Sequence[str] | None = None) -> list[PicoRecord]:
        """One prompt for these papers; a repair turn on unparseable output; rules for the batch if that fails too."""
        messages = self.messages(texts if texts is not None else [paper_prompt_text(p) for p in papers])
        wanted = [p.pmid for p in papers]
        try:
            reply = self.brain.chat(messages)
            items, error = parse_reply(reply)
            if error:
                log.warning("%s: PICO reply for %d PMIDs unusable (%s); asking once to fix the JSON", self.name,
                            len(wanted), error)  # fmt: skip
                messages = repair_messages(messages, reply, FIX_JSON_PROMPT)
                reply = self.brain.chat(messages)
                items, error = parse_reply(reply)
        except BrainError as exc:
            items, error = None, f"llm brain_error: {exc}"
        if error or items is None:
            return self._fall_back(papers, error or "llm json_error")
        return validate_items(items, wanted, self.name)

    def _fall_back(self, papers: Sequence[Paper], error: str) -> list[PicoRecord]:
        reason = error.split(":")[0]
        self.failures.append(f"PMIDs {papers[0].pmid}..{papers[-1].pmid} ({len(papers)}): {error}")
        log.warning("%s: %s for %d PMIDs; falling back to %s for this batch", self.name, error, len(papers),
                    self.fallback.name)  # fmt: skip
        label = f"{self.fallback.name} ({reason})"
        return [self.fallback.extract_one(p, label=label) for p in papers]


def paper_prompt_text(paper: Paper) -> str:
    abstract = paper.abstract or " ".join(s.text for s in paper.sections)
    return f"PMID {paper.pmid}\nTitle: {paper.title}\nAbstract: {abstract or '(none)'}"


def make_extractor(brain: ChatBrain | None, cfg: Config | None = None) -> Extractor:
    """The LLM extractor for an LLM brain; `[pico] extractor` (the learned tagger by default, or the rules) when there
    is none or it is the rules brain."""
    if brain is None or brain.name.startswith("rules:"):
        return default_extractor(cfg)
    return LlmExtractor.from_config(brain, cfg) if cfg else LlmExtractor(brain)


# --------------------------------------------------------------------------- reply parsing and validation

_FENCE = re.compile(r"```(?:json5?|javascript)?\s*(.*?)```", re.S | re.I)
KEY_ALIASES = {
    "pmid": "pmid",
    "id": "pmid",
    "p": "P",
    "population": "P",
    "participants": "P",
    "i": "I",
    "intervention": "I",
    "c": "C",
    "comparator": "C",
    "comparison": "C",
    "control": "C",
    "o": "O",
    "outcome": "O",
    "outcomes": "O",
    "studydesign": "StudyDesign",
    "study_design": "StudyDesign",
    "design": "StudyDesign",
    "populationage": "PopulationAge",
    "population_age": "PopulationAge",
    "age": "PopulationAge",
    "samplesize": "SampleSize",
    "sample_size": "SampleSize",
    "n": "SampleSize",
}


def parse_reply(reply: str) -> tuple[list[dict] | None, str]:
    """The record objects of a model reply (JSON5, code fences tolerated), or (None, "llm json_error: …")."""
    if not isinstance(reply, str) or not reply.strip():
        return None, "llm json_error: empty reply"
    fenced = _FENCE.search(reply)
    text = fenced.group(1) if fenced else reply
    for open_, close in (("[", "]"), ("{", "}")):
        start, end = text.find(open_), text.rfind(close)
        if start < 0 or end <= start:
            continue
        try:
            data = json5.loads(text[start : end + 1])
        except ValueError as exc:
            return None, f"llm json_error: {str(exc)[:120]}"
        items = _record_list(data)
        if items:
            return items, ""
        return None, "llm schema_error: no record objects with a pmid"
    return None, "llm json_error: no JSON array or object in the reply"


def _record_list(data: Any) -> list[dict]:
    if isinstance(data, dict):
        if any(str(k).lower() == "pmid" for k in data):
            data = [data]
        else:
            data = next((v for v in data.values() if isinstance(v, list)), [])
    if not isinstance(data, list):
        return []
    return [d for d in data if isinstance(d, dict) and any(str(k).lower() == "pmid" for k in d)]


def _as_text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else str(value)
    if isinstance(value, str):
        return " ".join(value.split())[:MAX_FIELD_CHARS]
    if isinstance(value, list):
        return "; ".join(t for t in (_as_text(v) for v in value if not isinstance(v, (dict, list))) if t)[
            :MAX_FIELD_CHARS
        ]
    return ""


def _as_pmid(value: Any) -> int | None:
    text = str(value).strip() if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    return int(text) if text.isdigit() and int(text) > 0 else None


def validate_items(items: Iterable[dict], wanted: Sequence[int], extractor: str) -> list[PicoRecord]:
    """One record per wanted PMID, in order: unknown PMIDs dropped, missing PMIDs and keys as "", values as strings."""
    wanted_set = set(wanted)
    by_pmid: dict[int, PicoRecord] = {}
    dropped: list[str] = []
    for item in items:
        pmid = _as_pmid(next((v for k, v in item.items() if str(k).lower() in ("pmid", "id")), None))
        if pmid is None or pmid not in wanted_set:
            dropped.append(str(item.get("pmid", "?")))
            continue
        if pmid in by_pmid:
            continue
        values: dict[str, str] = {}
        for key, value in item.items():
            name = KEY_ALIASES.get(str(key).strip().lower().replace(" ", ""), None)
            if name and name != "pmid" and name not in values:
                values[name] = _as_text(value)
        by_pmid[pmid] = PicoRecord.of(pmid, values, extractor)
    if dropped:
        log.warning("%s: dropped %d record(s) for PMIDs not in the batch: %s", extractor, len(dropped),
                    ", ".join(dropped[:10]))  # fmt: skip
    missing = [p for p in wanted if p not in by_pmid]
    if missing:
        log.warning("%s: reply lacks %d PMID(s) (kept with empty fields): %s", extractor, len(missing),
                    ", ".join(map(str, missing[:10])))  # fmt: skip
    return [by_pmid.get(p) or PicoRecord(pmid=p, extractor=f"{extractor} (pmid missing from reply)") for p in wanted]


# --------------------------------------------------------------------------- consistency guard and eligibility


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def consistency_warnings(records: Iterable[PicoRecord], papers: Iterable[Paper] = ()) -> list[str]:
    """Records with identical P/I/O but conflicting StudyDesign classes, flagged for manual audit (memo §4)."""
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
    "LlmExtractor",
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
    "make_extractor",
    "parse_reply",
    "pico_code_version",
    "pico_texts",
    "read_pico",
    "run_pico",
    "validate_items",
    "write_pico",
]
