"""The code location as the UI shows it: a description on every asset, asset check, job, sensor and schedule;
the checks that judge the store on their own are separate @asset_check definitions; the handbook Enum."""

from __future__ import annotations

import dagster as dg
import pytest

STANDALONE_CHECKS = {
    ("papers", "no_empty_titles"),
    ("papers", "deleted_citations_absent"),
    ("references", "ref_src_in_paper"),
    ("embedding_shards", "shards_on_configured_model"),
    ("embedding_index", "offsets_sorted_unique"),
    ("embedding_index", "vectors_finite_unit_norm"),
    ("embedding_index", "every_paper_embedded"),
    ("clusters", "members_exist_in_paper"),
    ("clusters", "tau_assign_in_range"),
}
# judged on what the materialising run itself produced (a partition's output): they stay with their asset
RUN_CHECKS = {
    ("pubmed_search", "search_complete"),
    ("pico_extractions", "pico_jsonl_valid"),
    ("review_questions", "review_questions_well_formed"),
    ("review_questions", "verdicts_unchanged"),
}


@pytest.fixture(scope="module")
def defs() -> dg.Definitions:
    from ra_assets.definitions import defs as load

    return load()


def test_every_definition_has_a_description(defs):
    graph = defs.resolve_asset_graph()
    missing = [f"asset {key.to_user_string()}" for key in graph.get_all_asset_keys() if not graph.get(key).description]
    repo = defs.get_repository_def()
    for check_key in graph.asset_check_keys:
        spec = graph.get_check_spec(check_key)
        if not spec.description:
            missing.append(f"check {check_key.asset_key.to_user_string()}.{check_key.name}")
    missing += [
        f"job {job.name}" for job in repo.get_all_jobs() if not job.name.startswith("__") and not job.description
    ]
    missing += [f"sensor {s.name}" for s in repo.sensor_defs if not s.description]
    missing += [f"schedule {s.name}" for s in repo.schedule_defs if not s.description]
    assert not missing, "no description: " + ", ".join(missing)


def test_store_checks_are_separate_asset_checks(defs):
    graph = defs.resolve_asset_graph()
    every = {(k.asset_key.to_user_string(), k.name) for k in graph.asset_check_keys}
    assert every == STANDALONE_CHECKS | RUN_CHECKS
    standalone = {(k.asset_key.to_user_string(), k.name) for c in defs.asset_checks or [] for k in c.check_keys}
    assert standalone == STANDALONE_CHECKS
    blocking = {
        (k.asset_key.to_user_string(), k.name) for k in graph.asset_check_keys if graph.get_check_spec(k).blocking
    }
    assert ("papers", "no_empty_titles") in blocking and (
        "embedding_shards",
        "shards_on_configured_model",
    ) not in blocking


def test_handbook_job_offers_the_handbooks_as_an_enum(defs):
    from ra_assets.defs.agent.automation import HANDBOOKS

    job = defs.resolve_job_def("handbook_job")
    field = job.get_config_schema_snapshot()
    enum_types = {k: t for k, t in field.all_config_snaps_by_key.items() if t.kind and t.kind.value == "ENUM"}
    (snap,) = enum_types.values()
    shipped = sorted(p.stem for p in HANDBOOKS.folder.glob("*.md"))
    assert [v.value for v in snap.enum_values or []] == shipped and "seek_gap_ppi_gerd" in shipped
    assert HANDBOOKS.default == "seek_gap_ppi_gerd"


def test_pico_extractions_code_version_names_the_model_the_span_code_and_the_rules(defs):
    """A new model file, a change to how the tagger's spans become fields, or a new rules version each change the
    asset's code version, so Dagster shows the extractions stale."""
    from ra_agent.evidence.pico import learned
    from ra_agent.evidence.pico.extract import pico_code_version

    version = defs.resolve_asset_graph().get(dg.AssetKey("pico_extractions")).code_version
    assert version == pico_code_version()
    assert version == f"{learned.model_version()}+{learned.spans_version()}+rules:pico-cues-v3", version
    assert version.startswith("learned:pico-crf-v2@") and "+spans@" in version


def test_the_instance_config_ra_writes_turns_the_new_user_dialog_off(tmp_path):
    """scripts/profile.sh seeds $DAGSTER_HOME with scripts/dagster.yaml: no telemetry, and no "Join the Dagster
    community" dialog over the UI of a fresh instance (`nux`), as the installed Dagster's instance schema reads it."""
    import shutil
    from pathlib import Path

    shutil.copy(Path(__file__).resolve().parents[2] / "scripts" / "dagster.yaml", tmp_path / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.nux_enabled is False and instance.telemetry_enabled is False


def test_the_lineage_link_expands_every_asset_group(defs):
    """scripts/ui.sh prints the lineage page with every group of the Definitions expanded (the README's picture)."""
    from urllib.parse import parse_qs, urlparse

    from ra_assets.lineage import GROUPS, lineage_url, main

    groups = {spec.group_name for spec in defs.resolve_all_asset_specs()}
    assert set(GROUPS) == groups and len(GROUPS) == len(groups)
    url = urlparse(lineage_url("http://127.0.0.1:3001"))
    assert (url.netloc, url.path) == ("127.0.0.1:3001", "/asset-groups")
    assert parse_qs(url.query)["expanded"] == [",".join(f"global@global:{g}" for g in GROUPS)]
    assert main(["-h", "0.0.0.0", "-p", "3005", "--code-server-log-level", "info"]) == 0
