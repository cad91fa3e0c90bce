"""Dagster resources: thin wrappers that build ra_agent clients from config.toml."""

import functools
import os
from pathlib import Path

import dagster as dg

from ra_agent.config import Config, load_config
from ra_agent.store import Store
from ra_agent.workspace import Workspace, open_store


class RaConfigResource(dg.ConfigurableResource):
    """The project's config.toml (RA_CONFIG or ./config.toml); secrets come from the environment only."""

    config_path: str = "config.toml"

    def get_config(self) -> Config:
        path = Path(self.config_path).resolve()
        if not path.exists():
            return load_config(path)  # raises ConfigError naming the file
        overrides = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("RA_")))
        return _cached_config(str(path), path.stat().st_mtime_ns, overrides)


@functools.lru_cache(maxsize=8)
def _cached_config(path: str, mtime_ns: int, overrides: tuple) -> Config:
    return load_config(path)


class StoreResource(dg.ConfigurableResource):
    """The SQLite store (WAL) of the workspace."""

    ra: RaConfigResource

    def get_client(self) -> Store:
        return open_store(self.ra.get_config())


class EutilsResource(dg.ConfigurableResource):
    """NCBI E-utilities client (base URL, rate limit and retries from config; API key from the environment)."""

    ra: RaConfigResource

    def get_client(self, store: Store | None = None):
        from ra_agent.ingest import EutilsClient

        return EutilsClient(self.ra.get_config(), store=store)


class CrossrefResource(dg.ConfigurableResource):
    """Crossref REST client with the on-disk JSON cache."""

    ra: RaConfigResource

    def get_client(self):
        from ra_agent.ingest import CrossrefClient

        cfg = self.ra.get_config()
        return CrossrefClient(cfg, Workspace.of(cfg).cache_dir)


class EmbedderResource(dg.ConfigurableResource):
    """Sentence-transformers embedder named by [embedding] model_name / model_version."""

    ra: RaConfigResource

    def get_client(self):
        from ra_agent.embed import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(self.ra.get_config())


class BrainResource(dg.ConfigurableResource):
    """The agent's brain: Ollama when a server answers, else the labelled rule-based brain."""

    ra: RaConfigResource

    def get_client(self, store: Store | None = None):
        from ra_agent.llm import brain_for

        return brain_for(self.ra.get_config(), store)


def build_resources(config_path: str = "config.toml") -> dict[str, dg.ConfigurableResource]:
    """The resource dict every Definitions/materialize call in ra uses."""
    ra = RaConfigResource(config_path=config_path)
    return {
        "ra": ra,
        "store": StoreResource(ra=ra),
        "eutils": EutilsResource(ra=ra),
        "crossref": CrossrefResource(ra=ra),
        "embedder": EmbedderResource(ra=ra),
        "brain": BrainResource(ra=ra),
    }


def configured_embedding_slug(config_path: str | None = None) -> str:
    """Model id + version of [embedding] as a slug: the `code_version` of embedding assets.

    Read when the code location loads, so a model bump in config.toml shows the
    embedding shards as unsynced in the UI until a backfill re-embeds them.
    """
    from ra_agent.config import ConfigError
    from ra_agent.store import configured_slug

    try:
        cfg = load_config(config_path)
    except ConfigError:
        cfg = Config()
    return configured_slug(cfg)
