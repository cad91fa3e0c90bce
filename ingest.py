"""`python -m ingest --since DATE --retmax N [--query Q]`: the memo-20 ingest command (same as `ra ingest`)."""

import argparse
import os
import sys

from ra_agent.cli import add_ingest_args, cmd_ingest, run

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m ingest", description=__doc__)
    parser.add_argument("--config", default=os.environ.get("RA_CONFIG", "config.toml"))
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    add_ingest_args(parser)
    sys.exit(run(cmd_ingest, parser.parse_args()))
