"""Drive ra's sensors and jobs in this process on a Dagster instance, as the daemon would (the demo, the tests).

A run executed here carries the tags the daemon gives a sensor's run (`dagster/sensor_name`,
`dagster/run_key`), so a daemon started later on the same instance (scripts/ui.sh) sees the request
as done and never launches it again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import dagster as dg

from ra_assets.resources import build_resources

log = logging.getLogger(__name__)


def tick(sensor: dg.SensorDefinition, instance: dg.DagsterInstance, config_path: str | Path, cursor: str | None = None,
         log_level: str | None = None):  # fmt: skip
    """One evaluation of `sensor` with ra's resources: (SensorResult | SkipReason, the context); `log_level` quiets
    the sensor's own context.log below it (the demo's console)."""
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, resources=build_resources(str(config_path))
    ) as context:
        if log_level:
            context.log.setLevel(logging.getLevelName(log_level))
        return sensor(context), context


def console_level(run_config: dg.RunConfig | Mapping[str, Any] | None, log_level: str | None) -> dict:
    """A run config dict; with `log_level`, Dagster's console logger (the run's event log) shows only that level."""
    out = run_config.to_config_dict() if isinstance(run_config, dg.RunConfig) else dict(run_config or {})
    if log_level:
        out["loggers"] = {"console": {"config": {"log_level": log_level}}}
    return out


def execute(defs: dg.Definitions, instance: dg.DagsterInstance, request: dg.RunRequest, sensor_name: str = "",
            raise_on_error: bool = True, log_level: str | None = None,
            job_name: str | None = None) -> dg.ExecuteInProcessResult:  # fmt: skip
    """Execute a sensor's run request in this process, tagged as that sensor's run (`job_name`: the sensor's
    single job, for requests that name none)."""
    job = defs.resolve_job_def(request.job_name or job_name or "")
    tags = {**request.tags, "dagster/run_key": request.run_key or ""}
    if sensor_name:
        tags["dagster/sensor_name"] = sensor_name
    return job.execute_in_process(
        instance=instance,
        partition_key=request.partition_key,
        run_config=console_level(request.run_config, log_level),
        tags=tags,
        raise_on_error=raise_on_error,
    )


def apply(result: dg.SensorResult, instance: dg.DagsterInstance) -> None:
    """Add the dynamic partitions a sensor result asks for (the daemon does this before launching its runs)."""
    for request in result.dynamic_partitions_requests or []:
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))


def drive(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    config_path: str | Path,
    sensor: dg.SensorDefinition,
    ticks: int = 40,
    cursor: str | None = None,
    on_run: Callable[[dg.RunRequest, dg.ExecuteInProcessResult], None] | None = None,
    raise_on_error: bool = True,
    log_level: str | None = None,
):
    """Tick `sensor` and execute what it asks for until it skips (or `ticks` run out).

    Returns the last SkipReason (None when `ticks` ran out first) and the cursor.
    """
    for _ in range(ticks):
        result, _context = tick(sensor, instance, config_path, cursor, log_level)
        if isinstance(result, dg.SkipReason):
            return result, cursor
        if not isinstance(result, dg.SensorResult):  # ra's sensors return a SensorResult or a SkipReason
            raise TypeError(f"{sensor.name} returned {type(result).__name__}, not a SensorResult")
        cursor = result.cursor
        apply(result, instance)
        for request in result.run_requests or []:
            done = execute(
                defs,
                instance,
                request,
                sensor.name,
                raise_on_error=raise_on_error,
                log_level=log_level,
                job_name=None if request.job_name else sensor.job_name,
            )
            if on_run is not None:
                on_run(request, done)
    return None, cursor
