"""A reader that leaves early (`ra status | head -1`) ends every command quietly: exit 141 (as SIGPIPE ends other
commands) or 0, nothing on stderr, never "internal error: BrokenPipeError"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOOD_CSV = "record_id,pubmedID,title,authors,abstract,year\n1,48880002,Good title,Smith A,A good abstract.,2020\n"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RA_")}
    return {**env, "HF_HUB_OFFLINE": "1"}


def test_ra_status_piped_into_head_ends_quietly(tmp_path):
    (tmp_path / "config.toml").write_text('[workspace]\ndata_dir = "ws"\ndemo_corpus = ""\n')
    (tmp_path / "good.csv").write_text(GOOD_CSV)
    ra = f"{sys.executable} -m ra_agent.cli"
    script = f'{ra} import good.csv >/dev/null 2>&1; {ra} status | head -1; echo "exit ${{PIPESTATUS[0]}}"'
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, env=_env(),
                          timeout=120)  # fmt: skip
    # exit 141 when ra writes after head has gone, 0 when head read all ra wrote in one go first (a race between the
    # two processes; both are quiet ends, as in the test below)
    assert done.stdout.splitlines() in ([f"workspace: {tmp_path / 'ws'}", f"exit {code}"] for code in (141, 0)), (
        done.stdout
    )
    assert "Error" not in done.stderr and "internal error" not in done.stderr, done.stderr


def test_every_command_ends_quietly_when_its_reader_is_gone(tmp_path):
    """Each command writes to a pipe whose read end is closed before it starts: the first write fails."""
    (tmp_path / "config.toml").write_text('[workspace]\ndata_dir = "ws"\ndemo_corpus = ""\n')
    (tmp_path / "good.csv").write_text(GOOD_CSV)
    # the parser's own output, a command's output, a command that works on the store first, an input error: the
    # handling sits where every command passes (cli.main and cli.run)
    commands = [["--help"], ["queries"], ["import", "good.csv"], ["run", "no_such_handbook"]]
    procs = []
    for argv in commands:
        proc = subprocess.Popen([sys.executable, "-m", "ra_agent.cli", "--config", "config.toml", *argv], cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())  # fmt: skip
        assert proc.stdout is not None
        proc.stdout.close()  # the reader is gone before the command writes anything
        procs.append(proc)
    for argv, proc in zip(commands, procs, strict=True):
        _, err = proc.communicate(timeout=120)
        text = err.decode()
        assert "BrokenPipe" not in text and "Traceback" not in text and "internal error" not in text, (argv, text)
        if argv == ["run", "no_such_handbook"]:  # an error goes to stderr, whatever became of stdout
            assert proc.returncode == 2 and "no_such_handbook: no such handbook" in text
        else:
            assert proc.returncode in (0, 141), (argv, proc.returncode, text)
