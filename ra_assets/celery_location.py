"""ra's code location on dagster-celery: `ra_assets.definitions` with every step sent to Celery workers.

Point a workspace at `module_name: ra_assets.celery_location` (docs/deploy.md; needs `pip install -e .[celery]`).
The executor's settings come from `scripts/dagster-celery.yaml` (or the file RA_CELERY_YAML names), the same
file every worker starts with (`dagster-celery worker start -A dagster_celery.app -y <file>`), so the runs and
the workers meet at one broker with the same delivery rules. A backfill of the embedding shards is one run per
shard here (RA_CELERY_SHARDS_PER_RUN shards per run), so it spreads over the workers. ra's core never imports
this module.
"""

import os
import warnings
from pathlib import Path
from typing import Any

import dagster as dg
import yaml
from dagster._config import validate_config
from dagster_celery import celery_executor

from ra_assets import definitions as ra  # a module: one @dg.definitions function in this module's scope

# dagster-celery registers its step task again for every step it submits; Celery warns each time (its own call)
warnings.filterwarnings("ignore", message=r"Task name 'execute_plan' is already registered to a different callable")

DEFAULT_YAML = Path(__file__).resolve().parents[1] / "scripts" / "dagster-celery.yaml"
SHARDS = dg.AssetKey("embedding_shards")
SHARDS_PER_RUN_ENV = "RA_CELERY_SHARDS_PER_RUN"


class CeleryConfigError(ValueError):
    """The executor file is missing or does not hold a valid `execution: config:` block for dagster-celery."""


def celery_yaml() -> Path:
    return Path(os.environ.get("RA_CELERY_YAML") or DEFAULT_YAML)


def executor_config(path: Path) -> dict[str, Any]:
    """The `execution: config:` block of `path`, checked against dagster-celery's schema (env refs unresolved)."""
    try:
        parsed = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as e:
        raise CeleryConfigError(f"{path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise CeleryConfigError(f"{path}: {line}not valid YAML ({getattr(e, 'problem', None) or e})") from None
    execution = parsed.get("execution") if isinstance(parsed, dict) else None
    config = execution.get("config") if isinstance(execution, dict) else None
    if not isinstance(config, dict):
        raise CeleryConfigError(f"{path}: execution.config: expected a mapping of dagster-celery executor settings")
    checked = validate_config(celery_executor.config_schema.config_type, config)
    if not checked.success and checked.errors:
        first = checked.errors[0]
        fields = [str(getattr(e, "field_name", getattr(e, "list_index", "?"))) for e in first.stack.entries]
        where = ".".join(["execution", "config", *fields])
        raise CeleryConfigError(f"{path}: {where}: {first.message.splitlines()[0]}")
    return config


def shards_per_backfill_run() -> int:
    """Embedding shards per run of a backfill (RA_CELERY_SHARDS_PER_RUN, default 1): each run is one step on one
    worker, so a backfill spreads over the workers when it is several runs."""
    raw = os.environ.get(SHARDS_PER_RUN_ENV, "1")
    if not raw.isdigit() or int(raw) < 1:
        raise CeleryConfigError(f"environment {SHARDS_PER_RUN_ENV}: expected an integer >= 1, got {raw!r}")
    return int(raw)


def spread_backfills(base: dg.Definitions, per_run: int, executor: dg.ExecutorDefinition) -> dg.Definitions:
    """`base` with `executor`, and the embedding shards backfilled `per_run` partitions per run (a multi-run policy
    in place of the single run of ra_assets.definitions, which loads the model once but keeps a whole backfill,
    after a model bump, on one worker)."""
    policy = dg.BackfillPolicy.multi_run(max_partitions_per_run=per_run)
    unique = {id(a): a for a in base.assets or []}.values()  # the folder loader lists an asset once per importer
    assets = [
        a.with_attributes(backfill_policy=policy) if isinstance(a, dg.AssetsDefinition) and SHARDS in a.keys else a
        for a in unique
    ]
    return dg.Definitions(
        assets=assets, schedules=base.schedules, sensors=base.sensors, jobs=base.jobs, resources=base.resources,
        loggers=base.loggers, asset_checks=base.asset_checks, metadata=base.metadata, executor=executor,
    )  # fmt: skip


@dg.definitions
def defs() -> dg.Definitions:
    executor = celery_executor.configured(executor_config(celery_yaml()), name="ra_celery")
    return spread_backfills(ra.defs(), shards_per_backfill_run(), executor)
