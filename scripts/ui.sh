#!/usr/bin/env bash
# The Dagster UI and daemon (asset graph, sensors, schedule) for this project:
# DAGSTER_HOME defaults to .dagster_home/ with scripts/dagster.yaml, and
# `dagster dev` loads the code location from workspace.yaml. Extra args go to
# `dagster dev` (e.g. -p 3001).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
export DAGSTER_HOME=${DAGSTER_HOME:-$PWD/.dagster_home}
mkdir -p "$DAGSTER_HOME"
[ -f "$DAGSTER_HOME/dagster.yaml" ] || cp scripts/dagster.yaml "$DAGSTER_HOME/dagster.yaml"
# `dg dev` supersedes `dagster dev` in Dagster's new CLI; ra keeps the workspace.yaml entry
# point, so that one notice is silenced (any other warning still shows)
export PYTHONWARNINGS="ignore:Function \`dev_command\` is superseded:FutureWarning${PYTHONWARNINGS:+,$PYTHONWARNINGS}"
exec .venv/bin/dagster dev -w workspace.yaml "$@"
