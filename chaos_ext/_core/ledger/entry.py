"""One ledger entry, and whether the process that recorded it still runs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from chaos_ext._core import procfs as _procfs

__all__ = ["Entry", "process_start_time", "process_state"]


def process_state(pid: int) -> tuple[str, int] | None:
    """``(state letter, kernel start time)`` of ``pid`` from ``/proc``, None if gone."""
    found = _procfs.stat(pid)
    return None if found is None else (found.state, found.start_time)


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), None if gone.

    Used with the pid to tell a live owner from a recycled pid.
    """
    return _procfs.start_time(pid)


@dataclass(frozen=True)
class Entry:
    """One recorded fault. ``recipe`` is whatever its undo handler needs.

    ``identity`` says which system the fault lives in (``scope``: ``machine``,
    ``kubernetes`` or ``ssh``, with that system's fingerprint), so that an
    undo reaches the same system or refuses. ``watchdog`` is the fault's
    dead-man switch (:mod:`chaos_ext._core.watchdog`): its ``pid``, ``start``,
    ``grace_seconds`` and ``deadline`` (when a timed fault ends; None: untimed).
    """

    id: str
    kind: str
    target: str
    module: str
    recipe: dict[str, Any] = field(repr=False)
    run_id: str
    owner_pid: int
    owner_start: int | None
    created_at: float
    state: str = "open"
    closed_at: float | None = None
    note: str | None = None
    last_error: str | None = None
    identity: dict[str, Any] | None = None
    watchdog: dict[str, Any] | None = None

    def owner_alive(self) -> bool:
        """True while the process that recorded the entry still runs.

        A zombie (killed, not yet reaped by its parent) is dead: it holds
        nothing and will never undo anything.
        """
        found = process_state(self.owner_pid)
        if found is None or found[0] in ("Z", "X"):
            return False
        return self.owner_start is None or found[1] == self.owner_start

    def as_dict(self) -> dict[str, Any]:
        """For journals and ``gameday ledger --json`` (no recipe)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "target": self.target,
            "run_id": self.run_id,
            "owner_pid": self.owner_pid,
            "created_at": self.created_at,
            "state": self.state,
            "closed_at": self.closed_at,
            "note": self.note,
            "last_error": self.last_error,
            "identity": self.identity,
            "watchdog": self.watchdog,
        }

    def to_record(self) -> dict[str, Any]:
        """Every field, recipe included (the event log keeps this)."""
        return asdict(self)

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> Entry:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)
