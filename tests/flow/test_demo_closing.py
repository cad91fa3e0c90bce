"""How the demo ends: `ra demo` ends with the closing block scripts/demo.sh ends with (each goal's outcome, each report
to read with its subject and verdict as the report states them, the UI to open), and an asset check that did not
pass is said in words."""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg
import pytest
from demo_corpus import DEMO, demo_rows

from ra_agent.agent import closing_block, report_gist
from ra_agent.agent.closing import (
    DOSSIER_BEGIN,
    DOSSIER_END,
    closing_excerpt,
    dossier_excerpt,
    readme_block,
    readme_excerpt,
)
from ra_agent.cli import main
from ra_agent.config import load_config
from ra_agent.workspace import open_store
from ra_assets.defs.ingest.assets import papers
from ra_assets.defs.ingest.checks import deleted_citations_absent, no_empty_titles
from ra_assets.demo import check_outcomes
from ra_assets.resources import build_resources

ROOT = Path(__file__).resolve().parents[2]


def mask(line: str) -> str:
    """A closing line with its goal ids (a hash of the start time) masked."""
    return re.sub(r"\b[0-9a-f]{12}\b", "<goal>", line)


@pytest.mark.slow
def test_ra_demo_ends_with_the_closing_block_read_from_its_own_reports(demo_project, capsys):
    config = demo_project / "config.toml"  # the demo's settings: default coverage rule, the rules brain, offline
    config.write_text(f'[workspace]\ndata_dir = "data"\ndemo_corpus = "{DEMO}"\n[ingest]\noffline = true\n'
                      '[goal]\nloop_delay_s = 0\n[llm]\nbrain = "rules"\n')  # fmt: skip
    code = main(["--config", str(config), "demo", "--handbook", "seek_gap_ppi_gerd"])
    out = capsys.readouterr().out
    assert code == 0, out
    reports = [line[len("wrote ") :] for line in out.splitlines() if line.startswith("wrote ")]
    assert reports and not any(p.endswith(".json") for p in reports)
    block = out[out.index("\ndemo finished. What it found:\n") :].strip("\n").splitlines()

    found = block[1 : block.index("Read:")]
    assert found and all(re.fullmatch(r"  goal [0-9a-f]{12} \(seek_gap\): .+", g) for g in found)
    # each goal's answer in plain words, never a tool-call trace, never "success"
    assert found[0].split(": ", 1)[1].startswith("covered by Systematic review of proton pump inhibitors for the acute")
    assert not [g for g in found if re.search(r"success|Action|\{\"|Rule:", g)]
    read = block[block.index("Read:") + 1 : -2]
    assert read[0::2] == [f"  {p}" for p in reports]
    for path, gist in zip(reports, read[1::2], strict=True):  # subject and verdict, as the report itself says them
        text = open(path, encoding="utf-8").read()
        title = re.search(r"^# .*?:\s*(.+)$", text, re.M)
        verdict = re.search(r"\*\*Verdict:\s*(.+?)\.?\*\*", text)
        assert title and verdict and gist == f"    {title.group(1).strip()}: {verdict.group(1).strip()}"
    assert block[-2].startswith("See the asset graph of this workspace in the Dagster UI")
    assert block[-1] == "  bash scripts/ui.sh     then open http://127.0.0.1:3000  (Ctrl-C stops it)"

    # the README's excerpt is this block from a real run of scripts/demo.sh (scripts/readme_demo.py), goal ids and
    # the project's folder aside
    readme = readme_excerpt((ROOT / "README.md").read_text(encoding="utf-8"))
    mine = closing_excerpt(out.replace(f"{demo_project}/", ""))
    assert [mask(line) for line in mine] == [mask(line) for line in readme]
    # and the dossier's first lines it shows are this run's first dossier's, cut, never retyped
    shown = readme_block((ROOT / "README.md").read_text(encoding="utf-8"), DOSSIER_BEGIN, DOSSIER_END)
    written = dossier_excerpt(open(reports[0], encoding="utf-8").read())
    assert len(written) >= 10 and any(line.startswith("- **Verdict: covered") for line in written)
    assert [mask(line) for line in written] == [mask(line) for line in shown]

    assert report_gist(demo_project / "no_such_report.md") == ""
    assert closing_block([], found)[-3] == "  (no report written: see the goal states above)"


def test_the_bundled_corpus_passes_its_own_ingest_checks(tmp_path):
    """The bundled export's 44 PMID-only rows lost nothing: no_empty_titles passes (its description says how many
    and why they are kept), so the demo's corpus_job line reports no check that did not pass."""
    config = tmp_path / "config.toml"
    config.write_text(f'[workspace]\ndata_dir = "data"\ndemo_corpus = "{DEMO}"\n[ingest]\noffline = true\n')
    pmid_only = sum(1 for r in demo_rows() if not (r["title"] + r["abstract"]).strip())
    result = dg.materialize([papers, no_empty_titles, deleted_citations_absent], resources=build_resources(str(config)),
                            instance=dg.DagsterInstance.ephemeral())  # fmt: skip
    assert result.success
    assert check_outcomes(result) == "2 checks"
    (titles,) = [e for e in result.get_asset_check_evaluations() if e.check_name == "no_empty_titles"]
    assert titles.passed and f"{pmid_only} rows carry only a PMID" in (titles.description or "")
    assert pmid_only == 44

    with open_store(load_config(config)) as store:  # what an importer that lost a field would leave
        store.conn.execute(
            "UPDATE paper SET title = '' WHERE pmid = (SELECT MIN(pmid) FROM paper WHERE abstract != '')"
        )
        store.conn.commit()
    result = dg.materialize([papers, no_empty_titles], resources=build_resources(str(config)),
                            instance=dg.DagsterInstance.ephemeral(), raise_on_error=False)  # fmt: skip
    assert not result.success  # a blocking check
    assert check_outcomes(result) == (
        "1 checks, not passed: no_empty_titles (1 papers have an abstract but no title (an importer lost the field); "
        f"{pmid_only} rows carry only a PMID (no title, no abstract, as in the bundled Cohen export): nothing lost, "
        "kept and never embedded)"
    )
