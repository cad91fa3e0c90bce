"""One partitions definition per entity: searches, ingest batches (embedding shards), clusters, handbooks, weeks."""

from collections.abc import Iterable

import dagster as dg

# keys are ra_agent.workspace.query_key(query); the query text is in the store (search_query)
search_query_partitions = dg.DynamicPartitionsDefinition(name="search_query")

# keys are Store ingest_batch ids; each batch holds <= [embedding] refresh_threshold papers
ingest_batch_partitions = dg.DynamicPartitionsDefinition(name="ingest_batch")

# keys are frozen cluster ids (cluster_manifest.cluster_id)
cluster_partitions = dg.DynamicPartitionsDefinition(name="cluster")

# keys are handbook keys (ra_agent.evidence.questions.question_set.question_set_key: "<stem>-<hash of its path>")
handbook_partitions = dg.DynamicPartitionsDefinition(name="handbook")

# keys are "<cluster_id>.<semantic|ripple>" (ra_agent.agent.stages.expansion_key)
expansion_partitions = dg.DynamicPartitionsDefinition(name="cluster_expansion")

baseline_week_partitions = dg.WeeklyPartitionsDefinition(start_date="2026-01-05", day_offset=1)


def partition_name(partitions: dg.DynamicPartitionsDefinition) -> str:
    """The instance-level name of a dynamic partitions definition (all of ra's are named)."""
    if partitions.name is None:
        raise ValueError("ra's dynamic partitions definitions are all named")
    return partitions.name


def unpartitioned(
    instance: dg.DagsterInstance, partitions: dg.DynamicPartitionsDefinition, keys: Iterable[str]
) -> list[str]:
    """The `keys` (in their order) that are not yet partitions of `partitions` on `instance`."""
    known = set(instance.get_dynamic_partitions(partition_name(partitions)))
    return [key for key in keys if key not in known]
