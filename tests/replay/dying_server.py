"""A local LLM server that dies mid-reply, as llama.cpp's did on a CPU it was not built for ("trap invalid opcode"):
an OpenAI-compatible loopback server (replay.openai_server) in its own process, which lists its model, starts
streaming the first chat reply and then kills itself with SIGKILL (no exit handler runs, as with a crash).

Run as `python dying_server.py` (the tests folder on sys.path); it prints its port on stdout, then logs like a
server to stderr.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from replay.base import Reply  # noqa: E402
from replay.openai_server import OpenAIReplayServer  # noqa: E402

MODEL = "gemma3-270m"  # the alias `ra llm serve` gives the model


class DyingServer(OpenAIReplayServer):
    """Streams the first piece of the first chat reply, then the process dies."""

    def _chat(self, body: dict) -> Reply:
        reply = super()._chat(body)
        if reply.stream is None:
            return reply
        return Reply(reply.status, reply.body, reply.content_type, reply.headers, stream=self._die_after(reply.stream))

    @staticmethod
    def _die_after(pieces) -> Iterator[bytes]:
        first_event = b"".join(pieces).split(b"\n\n")[0] + b"\n\n"  # of a reply that never ends
        yield first_event
        print("llama_decode: failed to decode, ret = -1 (the process is killed now)", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        yield b""


def main() -> None:
    action = {"tool": "search_pubmed", "args": {"query": "proton pump inhibitors"}}
    server = DyingServer(
        models=[MODEL], replies=[json.dumps({"reasoning": "Search the seed query.", "action": action})]
    )
    server.start()
    print("INFO:     Started server process", file=sys.stderr, flush=True)
    print(f"INFO:     Uvicorn running on http://127.0.0.1:{server.port} (Press CTRL+C to quit)", file=sys.stderr,
          flush=True)  # fmt: skip
    print(server.port, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
