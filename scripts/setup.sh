#!/usr/bin/env bash
# Create .venv (if needed) and install ra with its dependencies.
# torch is installed first as the pinned CPU build (torch==2.13.0), so nothing
# pulls the multi-GB CUDA build. Re-running is cheap: a stamp skips pip when
# pyproject.toml has not changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $($PY --version)"
    "$PY" -m venv .venv
fi
stamp=.venv/.ra-installed
want=$(sha1sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet torch==2.13.0
    .venv/bin/python -m pip install --quiet -e ".[dev]"
    echo "$want" > "$stamp"
    echo "setup: installed ra into .venv"
fi
