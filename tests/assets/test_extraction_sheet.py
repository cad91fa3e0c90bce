"""The extraction_sheet asset: upstream of the reports (so an SR draft is made again after a sheet is taken in), and,
called directly, the stored reviewer numbers in its metadata with a data version that changes when they change."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from ra_agent.config import load_config
from ra_agent.evidence.synthesis.sheet import ReviewerRow, store_reviewer
from ra_assets.defs.findings.assets import SheetImport, extraction_sheet
from ra_assets.resources import build_resources


def test_reports_are_downstream_of_the_sheet():
    from ra_assets.definitions import defs as load

    graph = load().resolve_asset_graph()
    assert dg.AssetKey("extraction_sheet") in graph.get(dg.AssetKey("reports")).parent_keys


def test_the_asset_reports_the_stored_reviewer_numbers(tmp_path: Path):
    config = tmp_path / "config.toml"
    config.write_text('[workspace]\ndata_dir = "data"\ndemo_corpus = ""\n[ingest]\noffline = true\n')
    resources = build_resources(str(config))

    def run() -> dg.MaterializeResult:
        with dg.build_asset_context(resources={"ra": resources["ra"], "store": resources["store"]}) as context:
            return extraction_sheet(context, SheetImport())

    empty = run()
    assert empty.metadata is not None and empty.metadata["reviewer_rows"] == 0
    cfg = load_config(config)
    row = ReviewerRow("s-1", 9354207, "healing", 4.0, "pantoprazole 40 mg", 5, 11, None, None, "", "team.xlsx row 2")
    store_reviewer(cfg, "conduct_sr_ppi", "q-1", Path("team.xlsx"), [row])
    one = run()
    assert one.metadata is not None and one.metadata["reviewer_rows"] == 1
    assert one.metadata["sheets"].data == {"team.xlsx": 1}
    assert one.data_version != empty.data_version
