"""Telling a team what changed: a webhook URL (an HTTP POST of the changes as JSON) and/or a command (the changes
in Markdown on its standard input), from [living] in config.toml. A webhook or command that fails is logged and
never fails the evaluation that called it (docs/living_evidence.md)."""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
import urllib.error
import urllib.request

from ra_agent.evidence.living.changes import Changes

log = logging.getLogger(__name__)


def notify(changes: Changes, webhook_url: str = "", command: str = "", timeout_s: float = 10.0) -> list[str]:
    """Send `changes` to the webhook and run the command (each when configured); returns one line per target
    saying how it went ("webhook <url>: HTTP 200", "command ...: failed (...)")."""
    outcomes = []
    if webhook_url:
        outcomes.append(_post(changes, webhook_url, timeout_s))
    if command:
        outcomes.append(_run(changes, command, timeout_s))
    return outcomes


def _post(changes: Changes, url: str, timeout_s: float) -> str:
    body = json.dumps({"handbook": changes.after.handbook, "key": changes.after.key, "summary": changes.summary(),
                       "lines": changes.lines(), "changes": changes.as_dict()}).encode("utf-8")  # fmt: skip
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "ra-living"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            outcome = f"webhook {url}: HTTP {response.status}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        outcome = f"webhook {url}: failed ({exc}); the evaluation is kept, only the message is lost"
        log.warning("[living] webhook_url: %s", outcome)
        return outcome
    log.info("[living] %s", outcome)
    return outcome


def _run(changes: Changes, command: str, timeout_s: float) -> str:
    try:
        done = subprocess.run(shlex.split(command), input=changes.markdown(), text=True, capture_output=True,
                              timeout=timeout_s, check=False)  # fmt: skip
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        outcome = f"command {command!r}: failed ({exc}); the evaluation is kept"
        log.warning("[living] webhook_command: %s", outcome)
        return outcome
    if done.returncode:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        outcome = f"command {command!r}: exit {done.returncode} ({tail[0][:200]}); the evaluation is kept"
        log.warning("[living] webhook_command: %s", outcome)
        return outcome
    log.info("[living] command %r: done", command)
    return f"command {command!r}: done"
