#!/usr/bin/env bash
# Quick start 2: install, then run the gates and the test suite.
# pytest's exit 5 ("no tests ran") is a failure like any other non-zero exit.
# The suite runs on both cores (pytest-xdist; RA_TEST_WORKERS=N for another number, 0 for one process); at its end
# it prints the 25 slowest tests (setup, call, teardown) and this script the time of each step and the total.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
step_started=$SECONDS
# step NAME: print the time the previous step took, then NAME (the next one)
step() {
    echo "test.sh: $1 (previous step $((SECONDS - step_started)) s; $((SECONDS - started)) s so far)"
    step_started=$SECONDS
}
trap 'echo "test.sh: total $((SECONDS - started)) s (exit $?)"' EXIT
step "setup"
bash scripts/setup.sh test  # ra and what the suite needs: a local LLM, chromium, redis-server, postgresql
export HF_HUB_OFFLINE=1
step "ruff check, ruff format --check"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# the type gate ([tool.pyright] in pyproject.toml) runs on one core while the two code locations load beside it
step "pyright, and dagster definitions validate for both code locations"
pyright_log=$(mktemp)
.venv/bin/pyright >"$pyright_log" 2>&1 &
pyright=$!
# validate WORKSPACE WHAT: the code location must load from WORKSPACE, and with no warnings (the CLI's own notice
# that `dg check defs` supersedes it is not about our definitions)
validate() {
    local out ours
    out=$(.venv/bin/dagster definitions validate -w "$1" 2>&1) || { echo "$out"; return 1; }
    ours=$(grep -v -e "SupersessionWarning: Function \`definitions_validate_command\`" -e "return callback(\*args" \
        <<<"$out" || true)
    if grep -qi "warning" <<<"$ours"; then echo "$out"; echo "test.sh: $2 loads with warnings"; return 1; fi
}
validate_status=0
validate workspace.yaml "the code location" || validate_status=1
validate workspace-celery.yaml "the celery location (ra_assets.celery_location, the [celery] extra)" || validate_status=1
pyright_status=0
wait "$pyright" || pyright_status=$?
cat "$pyright_log"
rm -f "$pyright_log"
if [ "$pyright_status" != 0 ] || [ "$validate_status" != 0 ]; then exit 1; fi
step "pytest"
workers=${RA_TEST_WORKERS:-2}
parallel=()
if [ "$workers" != 0 ]; then
    # tests/conftest.py groups the heaviest tests (one worker per group) and queues them first
    parallel=(-n "$workers" --dist loadgroup --no-loadscope-reorder)
fi
.venv/bin/python -m pytest -q "${parallel[@]}" --durations=25 "$@"
