"""The UI's global lineage with every asset group expanded, as docs/asset_graph.png shows it (no Dagster import).

Dagster's UI opens the global asset graph with its groups collapsed and keeps the groups a user expanded in the
page's `expanded=` query parameter (and the browser's local storage); no instance setting changes that. So
`scripts/ui.sh` prints this address: `python -m ra_assets.lineage [dagster dev args]` (its -h/--host, -p/--port).
"""

from __future__ import annotations

import argparse
import sys
from urllib.parse import quote

# the asset groups of the Definitions (group_name=); tests/assets/test_definitions.py checks they are all of them
GROUPS = ("ingest", "embeddings", "clusters", "findings", "memory", "screening")


def lineage_url(base: str = "http://127.0.0.1:3000", groups: tuple[str, ...] = GROUPS) -> str:
    """The global lineage page with `groups` expanded (the UI names a group "global@global:<group>")."""
    return f"{base}/asset-groups?expanded=" + quote(",".join(f"global@global:{g}" for g in groups), safe=",@:")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(add_help=False)  # `dagster dev`'s own arguments: read host and port, skip the rest
    parser.add_argument("-h", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", default="3000")
    args, _ = parser.parse_known_args(argv)
    host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    print(f"ra: the asset graph with every group expanded: {lineage_url(f'http://{host}:{args.port}')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
