"""Topics: reduce-then-cluster formation, audit, frozen centroids, intake, split/merge/drop, metrics, expansion, the
map (docs/architecture.md)."""

from ra_agent.topics.metrics import markdown_table
from ra_agent.topics.organise import organise, refresh_metrics

__all__ = ["markdown_table", "organise", "refresh_metrics"]
