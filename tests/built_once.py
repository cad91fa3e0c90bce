"""What every pytest-xdist worker would otherwise build for itself (an embedded corpus, a clustered demo workspace) is
built by one of them: the others wait on a file lock, then read what it wrote.

The lock is fcntl's (released by the kernel when its holder dies, so a crashed worker blocks nobody). A cached array is
written whole (a temp file renamed), and a shared folder counts as built only once its builder returned, so no reader
sees half of either.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from ra_agent.fileio import atomic_writer


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `<path>.lock` for the block: one process (xdist worker) at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def cached_array(path: Path, compute: Callable[[], np.ndarray]) -> np.ndarray:
    """The array saved at `path` (an .npy file in pytest's cache, keyed by content), computed by the first worker that
    asks and written whole; the others wait for it and load it."""
    with locked(path):
        if path.exists():
            return np.load(path)
        array = compute()
        with atomic_writer(path) as out:
            np.save(out, array)
        return array


def shared_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder all workers of this run share: the parent of each worker's base temp under xdist (where xdist keeps
    its workers' folders), the base temp itself in a run without workers."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def shared_folder(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name` in the run's shared temp, filled once by `build(folder)` (the first worker that asks; the
    others wait). Read-only for its users: a test that changes it works on a copy."""
    folder = shared_tmp(tmp_path_factory) / name
    done = folder.with_name(f"{name}.built")  # beside it, so that a copy of the folder does not hold it
    with locked(folder):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a builder that failed left a partial folder
            folder.mkdir(parents=True)
            build(folder)
            done.touch()
    return folder
