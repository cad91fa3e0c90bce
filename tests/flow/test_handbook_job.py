"""handbook_job as a Launchpad user meets it: the handbooks beside config.toml are an Enum read when the definitions
load (in a fresh process, as a code server loads them), and a handbook that does not parse fails the run with
one line naming file, line and key — a dg.Failure, not a stack trace around HandbookError."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LAUNCH = """
import json, sys
import dagster as dg
from ra_assets.definitions import defs

job = defs().resolve_job_def("handbook_job")
out = {}
with dg.instance_for_test() as instance:
    for name in sys.argv[1:]:
        result = job.execute_in_process(instance=instance, raise_on_error=False,
                                        run_config={"ops": {"start_goal_op": {"config": {"handbook": name}}}})
        failure = next((e.step_failure_data for e in result.all_events if e.is_step_failure), None)
        out[name] = {
            "success": result.success,
            "goal": result.output_for_node("start_goal_op") if result.success else None,
            "description": failure.user_failure_data.description if failure and failure.user_failure_data else None,
            "error_cls": failure.error.cls_name if failure and failure.error else None,
            "cause": failure.error.cause.cls_name if failure and failure.error and failure.error.cause else None,
        }
    schema = job.get_config_schema_snapshot()
    enum = next(t for t in schema.all_config_snaps_by_key.values() if t.kind and t.kind.value == "ENUM")
    out["choices"] = [v.value for v in enum.enum_values]
print("RESULT " + json.dumps(out))
"""


def test_handbook_choices_and_a_bad_handbook_fails_in_one_line(tmp_path):
    shutil.copytree(ROOT / "handbooks", tmp_path / "handbooks")
    broken = tmp_path / "handbooks" / "broken_draft.md"
    text = (ROOT / "handbooks" / "seek_gap_ppi_gerd.md").read_text(encoding="utf-8")
    broken.write_text(text.replace("Primary_goal: seek_gap", "Primary_goal: seek_gaps"), encoding="utf-8")
    (tmp_path / "config.toml").write_text('[workspace]\ndata_dir = "data"\ndemo_corpus = ""\n[llm]\nbrain = "rules"\n')
    env = {**os.environ, "RA_CONFIG": str(tmp_path / "config.toml"), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", LAUNCH, "broken_draft", "seek_gap_ppi_gerd"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))[len("RESULT ") :])

    assert out["choices"] == sorted(p.stem for p in (tmp_path / "handbooks").glob("*.md"))
    bad = out["broken_draft"]
    assert not bad["success"] and bad["error_cls"] == "Failure" and bad["cause"] is None
    assert "\n" not in bad["description"] and bad["description"].startswith(f"{broken}:")
    assert "Primary_goal" in bad["description"] and "seek_gaps" in bad["description"]
    good = out["seek_gap_ppi_gerd"]
    assert good["success"] and (tmp_path / "data" / "goals" / good["goal"] / "goal_state.json").exists()


def test_the_demo_refuses_an_unknown_handbook_with_exit_2_before_any_run(tmp_path, monkeypatch, capsys):
    """`scripts/demo.sh --handbook no_such_handbook` (python -m ra_assets.demo): one line listing the handbooks, exit
    2 (bad input, as the CLI), and the Dagster instance stays empty: no run was launched."""
    from ra_assets.demo import main

    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("RA_WORKSPACE__DATA_DIR", str(tmp_path / "data"))
    assert main(["--handbook", "no_such_handbook", "--config", str(ROOT / "config.toml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ra demo: handbook 'no_such_handbook' is not one of ") and "seek_gap_ppi_gerd" in err
    assert "\n" not in err and not any(home.iterdir()) and not (tmp_path / "data").exists()
