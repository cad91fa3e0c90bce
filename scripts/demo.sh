#!/usr/bin/env bash
# Quick start 1: install, then run the main job (the bundled seek-gap handbook)
# end to end on the bundled demo corpus, offline: SQLite + local files only.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1
export RA_INGEST__OFFLINE=true   # the bundled demo replays the local corpus: no API calls
exec .venv/bin/ra demo "$@"
