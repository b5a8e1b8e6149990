"""One undo of an entry at a time, across threads and processes.

Two rollbacks that find the same open entry (``gameday rollback`` beside a
run's own sweep, a duration's timer beside a rollback activity) must not both
run its undo and both say they did it. :func:`claimed` holds an exclusive
open-file-description lock (``F_OFD_SETLKW``) on one byte of
``<ledger>.undo.lock``, the byte named by the entry id: per open file, so
two threads of one process exclude each other as two processes do, and the
kernel drops it when its holder dies. The second claimant waits, then reads
the entry again and finds it closed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["claimed", "claims_path"]

_FLOCK = "hhqqi4x"  # struct flock on Linux (x86_64, aarch64): type, whence, start, len, pid
_BYTES = 1 << 40  # byte offsets the entry ids are spread over


def claims_path(ledger: Path) -> Path:
    return ledger.with_name(ledger.name + ".undo.lock")


def _offset(entry_id: str) -> int:
    return int.from_bytes(hashlib.sha256(entry_id.encode()).digest()[:8], "big") % _BYTES


def _lock(fd: int, kind: int, offset: int) -> None:
    fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, struct.pack(_FLOCK, kind, os.SEEK_SET, offset, 1, 0))


@contextmanager
def claimed(ledger: Path, entry_id: str) -> Iterator[None]:
    """Hold the undo claim of ``entry_id`` in ``ledger`` (waits for another holder)."""
    ledger.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(claims_path(ledger), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        offset = _offset(entry_id)
        _lock(fd, fcntl.F_WRLCK, offset)
        try:
            yield
        finally:
            _lock(fd, fcntl.F_UNLCK, offset)
    finally:
        os.close(fd)
