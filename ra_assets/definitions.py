"""The Dagster code location: every definition under ra_assets/defs, loaded by folder."""

import warnings
from pathlib import Path

import dagster as dg

# Dagster itself passes its beta `owners` parameter when it binds resources to the jobs of a
# sensor that targets op jobs (agent_cycle_job); the warning is about Dagster's own call, not ours.
warnings.filterwarnings("ignore", message=r"Parameter `owners` of initializer `SensorDefinition.__init__`")


@dg.definitions
def defs() -> dg.Definitions:
    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
