"""Crash-safe file replacement: every artefact ra rewrites goes through here.

A temp file is written next to the target, fsynced, then os.replace()d over it, and the folder
is fsynced so the rename itself survives a power cut. A crash at any point leaves either the old
file or the new one, never a torn mix; a failed write removes its temp file. Writers that must not overlap
take `exclusive_lock`.
"""

from __future__ import annotations

import codecs
import os
import sys
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
    fsync_dir(path.parent)


def atomic_write(path: Path, data: bytes | str) -> None:
    """Replace `path` with `data` (str is written as UTF-8)."""
    with atomic_writer(path) as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)


def fsync_dir(folder: Path) -> None:
    """Make a folder's entries (a rename into it) durable (POSIX; a no-op elsewhere)."""
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


if sys.platform == "win32":
    import msvcrt

    def _lock(f: BinaryIO) -> None:
        f.seek(0)
        while True:
            try:
                msvcrt.locking(f.fileno(), msvcrt.LK_LOCK, 1)
                return
            except OSError:  # LK_LOCK gives up after 10 s; keep waiting for the other writer
                continue

    def _unlock(f: BinaryIO) -> None:
        f.seek(0)
        msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _lock(f: BinaryIO) -> None:
        fcntl.flock(f, fcntl.LOCK_EX)

    def _unlock(f: BinaryIO) -> None:
        fcntl.flock(f, fcntl.LOCK_UN)


@contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on the file `path` (created when missing), held across processes and released by the OS
    if the holder dies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:
        _lock(f)
        try:
            yield
        finally:
            _unlock(f)


# ---------------------------------------------------------------------------- reading user files
_CHUNK = 1 << 20


class InputError(ValueError):
    """Bad input the user can fix; the message is `<file>[:<line>]: <field>: <what is wrong>`."""

    def __init__(self, path: str | Path, what: str, *, line: int | None = None, field: str | None = None):
        self.path, self.what, self.line, self.field = str(path), what, line, field
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {field}: {what}" if field else f"{where}: {what}")


def check_regular_file(path: Path, what: str = "file") -> int:
    """The size of `path`, or InputError when it is missing, a directory or a device (e.g. /dev/zero)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError(path, f"no such {what}") from None
    except OSError as exc:
        raise InputError(path, f"cannot read {what}: {exc.strerror or exc}") from None
    if path.is_dir():
        raise InputError(path, f"is a directory, not a {what}")
    if not path.is_file():
        raise InputError(path, f"not a regular file (a device or pipe), not a {what}")
    return st.st_size


def _not_utf8(path: Path, offset: int, value: int, line: int) -> InputError:
    return InputError(path, f"byte {offset} (0x{value:02x}) is not UTF-8; re-save the file as UTF-8", line=line,
                      field="encoding")  # fmt: skip


def _binary(path: Path, offset: int, line: int, what: str, head: bytes = b"") -> InputError:
    if utf16 := utf16_kind(head):  # its NUL bytes are the high bytes of its characters: name the encoding
        return InputError(path, f"{utf16} text, not UTF-8; re-save the file as UTF-8", line=1, field="encoding")
    return InputError(path, f"binary data (NUL byte at offset {offset}), not a text {what}", line=line, field="content")


def utf16_kind(head: bytes) -> str | None:
    """The UTF-16 byte order ("UTF-16 (little-endian)", ...) when the first bytes of a file are UTF-16 text: a
    byte-order mark, or mostly Latin characters whose other byte is NUL; else None."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        order = "little" if head[:2] == b"\xff\xfe" else "big"
        return f"UTF-16 ({order}-endian, with a byte-order mark)"
    sample = head[: len(head) // 2 * 2][:4096]
    if len(sample) < 8:
        return None
    even, odd = sample[0::2], sample[1::2]
    for order, zeros, text in (("little", odd, even), ("big", even, odd)):
        if zeros.count(0) >= 0.9 * len(zeros) and text.count(0) <= 0.1 * len(text):
            return f"UTF-16 ({order}-endian)"
    return None


def check_text_file(path: Path, what: str = "file") -> int:
    """Stream `path` once: InputError (with the line) if it is binary (NUL bytes) or not UTF-8; returns its size."""
    size = check_regular_file(path, what)
    decoder = codecs.getincrementaldecoder("utf-8")()
    line, offset = 1, 0
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            if (nul := chunk.find(b"\0")) >= 0 or (offset == 0 and utf16_kind(chunk)):
                raise _binary(
                    path, offset + nul, line + chunk.count(b"\n", 0, nul), what, chunk if offset == 0 else b""
                )
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                # the decoder may hold up to 3 bytes of the previous chunk: locate the bad byte in this one
                start = max(0, exc.start - (len(exc.object) - len(chunk)))
                raise _not_utf8(path, offset + start, chunk[start], line + chunk.count(b"\n", 0, start)) from None
            line += chunk.count(b"\n")
            offset += len(chunk)
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise InputError(
                path, "ends inside a UTF-8 character (truncated file?)", line=line, field="encoding"
            ) from None
    return size


def read_text_capped(path: Path, max_bytes: int, what: str = "file", knob: str = "") -> str:
    """The UTF-8 text of a small user file (handbook, config); InputError when too big, binary or not UTF-8."""
    size = check_regular_file(path, what)
    with path.open("rb") as fh:
        data = fh.read(max_bytes + 1)  # never more, whatever the file claims
    if len(data) > max_bytes:
        cap = f"the {max_bytes}-byte cap for a {what}" + (f" ({knob})" if knob else "")
        raise InputError(path, f"{max(size, len(data))} bytes is above {cap}", field="size")
    if (nul := data.find(b"\0")) >= 0 or utf16_kind(data):
        raise _binary(path, nul, data.count(b"\n", 0, nul) + 1, what, data)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc.start, data[exc.start], data.count(b"\n", 0, exc.start) + 1) from None
