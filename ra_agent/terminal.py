"""How ra writes to the terminal: one-line log messages on stderr, and a quiet end when stdout's reader has gone."""

from __future__ import annotations

import logging
import os
import sys

LOG_LEVELS = (logging.WARNING, logging.INFO, logging.DEBUG)  # by the count of -v


class QuietFormatter(logging.Formatter):
    """`ra: warning: <message>`, as the command line's own errors read (`-v` shows time, level and logger)."""

    def format(self, record: logging.LogRecord) -> str:
        return f"ra: {record.levelname.lower()}: {record.getMessage()}"


def log_handler(verbose: int) -> logging.Handler:
    """A stderr handler: warnings and errors only, one line each; `-v` INFO, `-vv` DEBUG with time and logger."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(LOG_LEVELS[min(verbose, len(LOG_LEVELS) - 1)])
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s") if verbose
                         else QuietFormatter())  # fmt: skip
    return handler


EXIT_CLOSED_STDOUT = 141  # 128 + SIGPIPE: what `ls | head -1` gives for the command the reader left


def stdout_closed() -> bool:
    """Whether the reader of stdout has gone (a pipe whose read end is closed polls as an error)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll() here, or stdout is no file: assume it was stdout
        return True


def quiet_exit_on_closed_stdout() -> int:
    """`ra status | head -1`: the reader took what it wanted and left; end quietly, as a command killed by SIGPIPE
    does (exit 141), with stdout pointed at /dev/null so that the interpreter's last flush finds no broken pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return EXIT_CLOSED_STDOUT
