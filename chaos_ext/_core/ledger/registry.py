"""Which ledgers hold open entries on this boot: one small file per open entry.

Markers (:mod:`.marker`) are kept where an operator chooses, so a ledger
whose marker lives in another folder is not found by them. Faults held by
this machine's kernel and processes (nft tables, qdiscs, helpers) live only
until the next boot, and so does this registry: ``/run/gameday/open`` (or
``$XDG_RUNTIME_DIR/gameday/open`` when ``/run`` is not writable,
``$GAMEDAY_RUNTIME_DIR/open`` when set). Each open entry has a file named
after its id holding the ledger's path; it is written before the entry is
recorded and removed after the entry is closed. A scan of the system
(``gameday ledger --scan``) and the sweeps read every ledger named here, so
an object recorded in any ledger of this boot is never taken for an orphan.

A file left behind (a close whose unlink was cut short, or a ledger deleted
since) names a ledger in which the entry is closed, or none: it owns
nothing, and goes with the next boot. Nothing here is trusted on its own:
the ledger a file names is read before anything is decided, and an entry's
ledger that cannot be registered (no writable folder) is still found by
its marker.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

__all__ = ["register", "registered", "registry_dir", "unregister"]

_ID = re.compile(r"^[0-9a-f]{8,32}$")


def registry_dir() -> Path:
    explicit = os.environ.get("GAMEDAY_RUNTIME_DIR")
    if explicit:
        return Path(explicit) / "open"
    run = Path("/run")
    if os.access(run, os.W_OK):
        return run / "gameday" / "open"
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/gameday-{os.getuid()}"  # noqa: S108
    return Path(runtime) / "gameday" / "open"


def register(entry_id: str, ledger: Path) -> None:
    """Note that ``ledger`` holds the open entry ``entry_id`` (best effort: markers remain)."""
    if not _ID.match(entry_id):
        return
    folder = registry_dir()
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / entry_id).write_text(str(ledger.absolute()))


def unregister(entry_id: str) -> None:
    if _ID.match(entry_id):
        with contextlib.suppress(OSError):
            (registry_dir() / entry_id).unlink()


def registered() -> dict[str, Path]:
    """``{entry id: ledger path}`` for every registered open entry."""
    folder = registry_dir()
    found: dict[str, Path] = {}
    with contextlib.suppress(OSError):
        for item in folder.iterdir():
            if not _ID.match(item.name):
                continue
            with contextlib.suppress(OSError):
                text = item.read_text().strip()
                if text:
                    found[item.name] = Path(text)
    return found
