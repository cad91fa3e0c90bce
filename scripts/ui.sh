#!/usr/bin/env bash
# The Dagster UI and daemon (asset graph, sensors, schedule) for this project, on the instance and workspace
# the demo (scripts/demo.sh) wrote: see scripts/profile.sh (DAGSTER_HOME default .dagster_home/, offline by
# default, RA_ONLINE=1 to search PubMed). `dagster dev` loads the code location from workspace.yaml; extra
# args go to it (e.g. `-p 3001 -h 127.0.0.1`; the default port is 3000).
#
# Stopping: Ctrl-C, SIGINT or SIGTERM to this script's pid stops dagster dev, the webserver, the daemon and
# the code servers, also when started in the background from a non-interactive shell (which starts it with
# SIGINT ignored): scripts/supervise.py runs dagster dev in its own process group and forwards the signal.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh ui  # ra only, as for the demo
source scripts/profile.sh
# `dg dev` supersedes `dagster dev` in Dagster's new CLI; ra keeps the workspace.yaml entry
# point, so that one notice is silenced (any other warning still shows)
export PYTHONWARNINGS="ignore:Function \`dev_command\` is superseded:FutureWarning${PYTHONWARNINGS:+,$PYTHONWARNINGS}"
.venv/bin/python -m ra_assets.lineage "$@"  # the UI opens the lineage with its groups collapsed: this link expands them
exec .venv/bin/python scripts/supervise.py .venv/bin/dagster dev -w workspace.yaml "$@"
