"""Processes still running, read from /proc (what a stop must not leave behind)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

__all__ = ["marked_sleep", "running_with_argument"]


def marked_sleep() -> str:
    """A ``sleep`` duration unique to one test (77.xxxxxx s), to find its process."""
    return f"77.{uuid.uuid4().int % 10**6:06d}"


def running_with_argument(argument: str) -> list[int]:
    """Pids of live processes (not zombies: their cmdline is empty) with an argument
    containing ``argument`` (a shell's ``-c`` script included)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile
            continue
        if any(argument.encode() in arg for arg in argv):
            found.append(int(entry.name))
    return found
