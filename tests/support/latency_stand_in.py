"""A stand-in for add_latency on a kernel without sch_netem (this host; the VM lane has it).

It records the netem entry exactly as :func:`chaos_ext.network.actions.add_latency`
does (kind, target label, recipe with the saved tree and the namespace key,
undo module) and installs only the root of the latency tree (htb, handle
``1d1a:``: what marks a tree as ours) with iproute2's ``tc``. Everything
after that (remove_latency, its sweep, the undo, ``gameday rollback``) is
the real code. Used by the crash rows of tests/crash/test_crash_spellings.py.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from typing import Any

from chaos_ext._core.ledger import fault
from chaos_ext._core.targets.identity import NETNS_KEY, namespace_key
from chaos_ext._core.targets.spec import netns_path, parse_target
from chaos_ext.network import _local

__all__ = ["stand_in_latency"]


def stand_in_latency(
    interface: str,
    target: str,
    configuration: Mapping[str, Any] | None = None,
    secrets: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Record a netem fault as add_latency does and put the latency tree's root in place."""
    where = parse_target(target)
    recipe = {
        "target": target,
        "interface": interface,
        "spec": {},
        "connection": {},
        "snapshot": _local.snapshot(where, interface),
        NETNS_KEY: namespace_key(where),
    }
    with fault(
        kind="netem",
        target=where.label(interface),
        recipe=recipe,
        module="chaos_ext.network.actions",
    ) as entry:
        subprocess.run(
            [
                "nsenter",
                f"--net={netns_path(where)}",
                "tc",
                "qdisc",
                "add",
                "dev",
                interface,
                "root",
                "handle",
                "1d1a:",
                "htb",
            ],
            check=True,
            timeout=30,
            capture_output=True,
        )
    return {"ledger_id": entry.id, "target": where.label(interface)}
