"""Embeddings: the embedder, token counting and token-aware sampling, and the passes that fill the vector index."""

from ra_agent.embed.embedder import SentenceTransformerEmbedder
from ra_agent.embed.index import build_index, embed_all, embed_shard, shards_behind

__all__ = ["SentenceTransformerEmbedder", "build_index", "embed_all", "embed_shard", "shards_behind"]
