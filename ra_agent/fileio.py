"""Crash-safe file replacement: every artefact ra rewrites goes through here.

A temp file is written next to the target, fsynced, then os.replace()d over it, and the folder
is fsynced so the rename itself survives a power cut. A crash at any point leaves either the old
file or the new one, never a torn mix; a failed write removes its temp file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


@contextmanager
def atomic_writer(path: Path) -> Iterator[BinaryIO]:
    """A binary file object whose content replaces `path` only when the block exits cleanly."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def atomic_write(path: Path, data: bytes | str) -> None:
    """Replace `path` with `data` (str is written as UTF-8)."""
    with atomic_writer(path) as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)


def _fsync_dir(folder: Path) -> None:
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
