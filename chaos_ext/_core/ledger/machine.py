"""Which machine, and which boot of it, this process runs on.

Faults held by local state (helper processes, network namespaces, qdiscs of
this host) can only be undone on the machine that holds them, and die with a
reboot. The ledger records this identity in every entry; an undo elsewhere is
refused (:class:`chaos_ext.errors.TargetMismatch`), an undo after a reboot of
the same machine closes the entry.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from chaos_ext._core import procfs as _procfs
from chaos_ext._core.ledger.entry import Entry
from chaos_ext.errors import TargetMismatch

__all__ = ["machine_identity", "machine_note", "same_boot", "same_machine"]


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


@cache
def machine_identity() -> dict[str, str]:
    """``hostname``, ``machine_id`` (``/etc/machine-id``, may be empty) and ``boot_id``."""
    return {
        "hostname": socket.gethostname(),
        "machine_id": _read("/etc/machine-id"),
        "boot_id": _procfs.boot_id(),
    }


def same_machine(recorded: Mapping[str, Any]) -> bool:
    """Whether ``recorded`` (a :func:`machine_identity`) names this machine."""
    here = machine_identity()
    if recorded.get("hostname") != here["hostname"]:
        return False
    ids = (recorded.get("machine_id"), here["machine_id"])
    return not all(ids) or ids[0] == ids[1]


def same_boot(recorded: Mapping[str, Any]) -> bool:
    """Whether this machine has not rebooted since ``recorded`` was taken."""
    return same_machine(recorded) and recorded.get("boot_id") == machine_identity()["boot_id"]


def machine_note(entry: Entry) -> str | None:
    """For a fault held on the recording machine: refuse elsewhere; after a reboot, gone."""
    identity = entry.identity or {}
    machine = identity.get("machine")
    if identity.get("scope") != "machine" or not machine:
        return None
    if not same_machine(machine):
        here = machine_identity()
        raise TargetMismatch(
            f"{entry.kind} on {entry.target} is held on host {machine.get('hostname')!r}"
            f" (machine-id {machine.get('machine_id') or '?'}), this is {here['hostname']!r}"
            f" (machine-id {here['machine_id'] or '?'}): run `gameday rollback` there"
        )
    if not same_boot(machine):
        return (
            f"host {machine.get('hostname')} rebooted since this fault was recorded: the"
            " processes and kernel state that held it are gone"
        )
    return None
