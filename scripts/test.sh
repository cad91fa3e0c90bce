#!/usr/bin/env bash
# Quick start 2: install, then run the gates and the test suite.
# pytest's exit 5 ("no tests ran") is a failure like any other non-zero exit.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/dagster definitions validate -m ra_assets.definitions
.venv/bin/python -m pytest -q "$@"
