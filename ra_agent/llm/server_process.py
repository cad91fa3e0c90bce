"""The llama.cpp server process `ra llm serve` starts: llama_cpp.server run in-process, removing ra's state file
when it is stopped (SIGTERM, SIGINT, SIGHUP), so no state file outlives a server stopped on request. A server that
dies (a crash, SIGKILL, an illegal instruction) leaves its state file: ra then says it died, with its log's end
(serve.died), and `ra llm serve` or `ra llm stop` removes the file.

Run as `python -m ra_agent.llm.server_process --ra-state-file PATH <llama_cpp.server arguments>`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

STATE_FLAG = "--ra-state-file"


def remove_own_state(path: Path | None) -> None:
    """Remove the state file when it names this process (a newer server's file is left alone)."""
    if path is None:
        return
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink(missing_ok=True)
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    state: Path | None = None
    if args[:1] == [STATE_FLAG] and len(args) >= 2:
        state, args = Path(args[1]), args[2:]

    def on_signal(signum, _frame) -> None:
        # uvicorn handles the signal while it serves, shuts down, restores this handler and raises the signal again
        remove_own_state(state)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    sys.argv = ["llama_cpp.server", *args]
    from llama_cpp.server.__main__ import main as llama_main

    llama_main()


if __name__ == "__main__":
    main()
