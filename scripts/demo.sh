#!/usr/bin/env bash
# Quick start 1: install, then run the main job through Dagster on the instance scripts/ui.sh opens
# (scripts/profile.sh: DAGSTER_HOME default .dagster_home/, offline by default on the bundled demo corpus):
# materialise the asset graph (papers, references, embedding shards, index, clusters, metrics), launch
# handbook_job with the seek-gap handbook and run its goal and the goals it spawns to their end.
# Prints progress and the written report paths (`wrote <path>`). Args go to `python -m ra_assets.demo`
# (--handbook NAME|PATH, --config PATH); `bash scripts/ui.sh` afterwards shows its runs and materialisations.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh demo  # ra only: no llama.cpp build, no apt packages (the tests need those)
source scripts/profile.sh
exec .venv/bin/python -m ra_assets.demo "$@"
