#!/usr/bin/env bash
# Quick start 2: install, then run the gates and the test suite.
# pytest's exit 5 ("no tests ran") is a failure like any other non-zero exit.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test  # ra and what the suite needs: a local LLM, chromium, redis-server, postgresql
export HF_HUB_OFFLINE=1
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/pyright  # the type gate: [tool.pyright] in pyproject.toml
# the code location must load from workspace.yaml, and with no warnings
out=$(.venv/bin/dagster definitions validate -w workspace.yaml 2>&1) || { echo "$out"; exit 1; }
# (the CLI's own notice that `dg check defs` supersedes it is not about our definitions)
ours=$(grep -v -e "SupersessionWarning: Function \`definitions_validate_command\`" -e "return callback(\*args" <<<"$out" || true)
if grep -qi "warning" <<<"$ours"; then echo "$out"; echo "test.sh: the definitions load with warnings"; exit 1; fi
# and so must the celery code location (ra_assets.celery_location, the [celery] extra)
out=$(.venv/bin/dagster definitions validate -w workspace-celery.yaml 2>&1) || { echo "$out"; exit 1; }
ours=$(grep -v -e "SupersessionWarning: Function \`definitions_validate_command\`" -e "return callback(\*args" <<<"$out" || true)
if grep -qi "warning" <<<"$ours"; then echo "$out"; echo "test.sh: the celery location loads with warnings"; exit 1; fi
.venv/bin/python -m pytest -q --durations=25 "$@"  # CI prints the 25 slowest tests (setup, call, teardown)
