"""Core data: the relational store (papers, references, searches, clusters, goals) and the fp16 vector families."""

from ra_agent.store.db import Store
from ra_agent.store.vectors import VectorStore, configured_slug, emb_root, missing_vectors, open_active

__all__ = ["Store", "VectorStore", "configured_slug", "emb_root", "missing_vectors", "open_active"]
