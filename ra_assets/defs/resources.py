"""Resources shared by every stage, built from RA_CONFIG (default ./config.toml)."""

import dagster as dg

from ra_agent.config import default_config_path
from ra_assets.resources import build_resources


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(resources=build_resources(str(default_config_path())))
