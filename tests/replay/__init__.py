"""Loopback replay servers for E-utilities and Crossref, serving real recorded responses with injectable faults."""

from .base import Fault, ReplayServer, Reply, RequestRecord
from .crossref_server import CrossrefReplayServer
from .eutils_server import EutilsReplayServer, load_index

__all__ = [
    "CrossrefReplayServer",
    "EutilsReplayServer",
    "Fault",
    "ReplayServer",
    "Reply",
    "RequestRecord",
    "load_index",
]
