"""Core data: the relational store (papers, references, searches, clusters, goals) and the fp16 vector families."""

from ra_agent.store.ann import AnnBuild, ann_state, build_ann
from ra_agent.store.ann import search as ann_search
from ra_agent.store.db import Store
from ra_agent.store.vectors import VectorStore, configured_slug, emb_root, missing_vectors, open_active

__all__ = [
    "AnnBuild",
    "ann_search",
    "ann_state",
    "build_ann",
    "Store",
    "VectorStore",
    "configured_slug",
    "emb_root",
    "missing_vectors",
    "open_active",
]
