"""The marker: proof, kept outside the ledger's files, that a ledger exists.

A database that is emptied, truncated or deleted together with its event
log would otherwise look like a ledger that never recorded anything. The
marker names the ledger's id and how many events it has seen, in
``$GAMEDAY_LEDGER_MARKERS`` (default ``$XDG_STATE_HOME/gameday/markers``),
one file per ledger path. Keep it on storage that outlives the ledger's
folder (in a CronJob: another volume than the ledger's).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["marker_path", "markers_dir", "read_marker", "remove_marker", "write_marker"]


def markers_dir() -> Path:
    explicit = os.environ.get("GAMEDAY_LEDGER_MARKERS")
    if explicit:
        return Path(explicit)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "gameday" / "markers"


def marker_path(ledger: Path) -> Path:
    """The marker of the ledger at ``ledger`` (named after its absolute path)."""
    key = hashlib.sha256(str(ledger.absolute()).encode()).hexdigest()[:20]
    return markers_dir() / f"{key}.json"


def read_marker(ledger: Path) -> dict[str, Any] | None:
    """The marker's content; None if there is none; ``{"unreadable": why}`` if damaged."""
    path = marker_path(ledger)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return {"unreadable": str(exc)}
    try:
        data = json.loads(text)
    except ValueError:
        return {"unreadable": f"{path} is not JSON"}
    return data if isinstance(data, dict) else {"unreadable": f"{path} is not an object"}


def write_marker(ledger: Path, ledger_id: str, seq: int) -> None:
    """Write the marker atomically (tmp file, fsync, rename)."""
    path = marker_path(ledger)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"ledger": str(ledger.absolute()), "ledger_id": ledger_id, "seq": seq}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w") as handle:
        json.dump(body, handle)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)


def remove_marker(ledger: Path) -> None:
    path = marker_path(ledger)
    path.unlink(missing_ok=True)
