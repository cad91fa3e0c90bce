"""Copy a store into another, e.g. a workspace's SQLite file into a fresh PostgreSQL database (docs/deploy.md).

    python scripts/store_copy.py data/ra.sqlite postgresql://ra@db.example.org:5432/ra

The target is created and migrated if needed and must hold no rows yet; then set `[store] url` to it.
"""

import argparse
import logging
import sys
from pathlib import Path

from ra_agent.store.copy import copy_store
from ra_agent.store.db import Store


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", help="SQLite file or postgresql:// URL to read")
    ap.add_argument("target", help="SQLite file or postgresql:// URL to fill")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if "://" not in args.source and not Path(args.source).is_file():  # opening it would create an empty store
        print(f"store_copy: {args.source}: source: no such SQLite file", file=sys.stderr)
        return 2
    with Store(args.source) as src, Store(args.target) as dst:
        try:
            copied = copy_store(src, dst)
        except ValueError as exc:  # another schema, or a target that already holds rows
            print(f"store_copy: {exc}", file=sys.stderr)
            return 2
    print(f"copied {sum(copied.values())} rows of {len(copied)} tables into {dst.where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
