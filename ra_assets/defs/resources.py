"""Resources shared by every stage, built from RA_CONFIG (default ./config.toml)."""

import os

import dagster as dg

from ra_assets.resources import build_resources


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(resources=build_resources(os.environ.get("RA_CONFIG", "config.toml")))
