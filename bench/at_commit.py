"""The benches' "before" figures: a short script run over the tree of another commit (git archive into a temporary
folder, that folder first on PYTHONPATH), in a subprocess of the same run, printing one `BEFORE-JSON {...}` line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = "BEFORE-JSON "


def run_at_commit(ref: str, script: str, args: list[str], label: str):
    """What `script` (run as `python -c script <tree> *args` in the tree of `ref`) printed after MARK, read as
    JSON; None, said under `label`, when the commit is not in this clone or the script printed no such line."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True)
        if archive.returncode != 0:
            print(f"{label} ({ref}): not in this clone ({archive.stderr.decode().strip()[:120]})")
            return None
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        done = subprocess.run([sys.executable, "-c", script, tmp, *args], env={**os.environ, "PYTHONPATH": tmp},
                              capture_output=True, text=True, cwd=tmp)  # fmt: skip
        line = next((x for x in done.stdout.splitlines() if x.startswith(MARK)), None)
        if line is None:
            print(f"{label} ({ref}): failed: {done.stderr.strip()[-300:]}")
            return None
        return json.loads(line.removeprefix(MARK))
