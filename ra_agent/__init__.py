"""ra: the pure core of the literature-discovery and systematic-review agent (no Dagster import).

Packages, imported one way only (lower never imports higher): config/models/fileio/hardware/store/workspace
<- llm <- embed <- ingest <- topics <- evidence <- ask <- agent <- cli."""
