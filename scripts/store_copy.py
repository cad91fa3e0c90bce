"""Copy a store into another, e.g. a workspace's SQLite file into a fresh PostgreSQL database (docs/deploy.md).

    python scripts/store_copy.py data/ra.sqlite postgresql://ra@db.example.org:5432/ra

The target is created and migrated if needed and must hold no rows yet; then set `[store] url` to it.
"""

import argparse
import logging

from ra_agent.store.copy import copy_store
from ra_agent.store.db import Store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", help="SQLite file or postgresql:// URL to read")
    ap.add_argument("target", help="SQLite file or postgresql:// URL to fill")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with Store(args.source) as src, Store(args.target) as dst:
        copied = copy_store(src, dst)
    print(f"copied {sum(copied.values())} rows of {len(copied)} tables into {dst.where}")


if __name__ == "__main__":
    main()
