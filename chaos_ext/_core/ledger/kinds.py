"""A fault kind as one declared object: :class:`FaultKind`.

Everything gameday needs to know about one kind of fault (the ``kind``
string its ledger entries carry) is declared once, next to its domain, in
``chaos_ext/<domain>/kinds.py``::

    LIMIT = FaultKind(
        name="dns-rate-limit",
        summary="cap the DNS packets per second a target sends",
        module="chaos_ext.dns.actions",
        actions={"limit_dns_rate": plan_limit_dns_rate},   # fault action -> its plan
        rollback="remove_dns_rate_limit",
        undo=undo_rate_limit,         # entry -> note; idempotent
        scan=Scan("nft tables inet gameday_dnsrate_* in every network namespace",
                  LOCAL, find_tables),
        ends_by_itself="at duration_seconds (watchdog), else when undone",
        failpoints=("dns-rate-limit.mid-apply", "dns-rate-limit.mid-undo"),
        docs="docs/dns.md",
    )
    FAULT_KINDS.declare(LIMIT)

:data:`chaos_ext._core.ledger.FAULT_KINDS` holds them (the undo registry
grown up): the ledger's undo, ``gameday plan``, ``gameday ledger --scan``,
``gameday faults``, discovery, the mutation check and the crash matrix all
iterate it instead of lists of names. ``tests/test_fault_kinds.py`` fails
when a kind lacks a part.

Roles: ``fault`` (injected by its actions, undone by its rollback),
``remedy`` (a change made on purpose and not undone: its undo says so),
``adoption`` (no action records it: ``gameday rollback --orphans`` records
an orphan the scan of ``adopts`` found under this kind, then undoes it),
``internal`` (the runner's own bookkeeping entries).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from chaos_ext._core.ledger.entry import Entry
from chaos_ext._core.ledger.leftover import Leftover

__all__ = [
    "CLUSTER",
    "DATABASE",
    "LOCAL",
    "FaultKind",
    "Finder",
    "Plan",
    "Role",
    "Scan",
    "ScanPlace",
    "UndoHandler",
]

UndoHandler = Callable[[Entry], "str | None"]
"""Undo the fault of an entry, idempotently; the note to close it with (None: "undone")."""
Plan = Callable[..., dict[str, Any]]
"""What an action would do, touching nothing (docs/conventions.md section 7)."""
Role = Literal["fault", "remedy", "adoption", "internal"]
ScanPlace = Literal["local", "kubernetes", "database"]
LOCAL: ScanPlace = "local"
CLUSTER: ScanPlace = "kubernetes"
DATABASE: ScanPlace = "database"
Finder = Callable[..., tuple[list[Leftover], list[str]]]
"""A scan's finder: ``()`` for a local scan, ``(api, identity)`` for the cluster, ``(dsn)``
for a database; returns (the objects found, what could not be looked at)."""


@dataclass(frozen=True)
class Scan:
    """What ``gameday ledger --scan`` looks for to find this kind's objects without a ledger.

    ``part`` names the scan (kinds that share a finder, such as every
    helper-held kind, share a part; it runs once); ``place`` says what it
    needs: this machine, a cluster (``find(api, identity)``) or a database
    (``find(dsn)``).
    """

    part: str
    looks_for: str
    place: ScanPlace
    find: Finder = field(compare=False, repr=False)


@dataclass(frozen=True)
class FaultKind:
    """One kind of fault, declared once (see the module doc)."""

    name: str
    summary: str
    undo: UndoHandler = field(repr=False)
    role: Role = "fault"
    module: str = ""
    actions: Mapping[str, Plan | None] = field(default_factory=dict, repr=False)
    rollback: str = ""
    scan: Scan | None = None
    ends_by_itself: str = ""
    failpoints: tuple[str, ...] = ()
    docs: str = ""
    adopts: str = ""

    @property
    def domain(self) -> str:
        """The package that declares it (``chaos_ext.dns``), from its module."""
        return self.module.rpartition(".")[0]

    def action(self, name: str) -> Callable[..., Any]:
        """The activity ``name`` of this kind's module (a fault action or the rollback)."""
        return getattr(importlib.import_module(self.module), name)  # type: ignore[no-any-return]

    def parser(self) -> Callable[[Mapping[str, Any]], Any] | None:
        """The one argument parser of its actions: the check ``@validated_by`` gave the first
        action (validation, the action and its plan all call it; None: types only)."""
        first = sorted(self.actions)[:1]
        return getattr(self.action(first[0]), "__gameday_check__", None) if first else None

    def plan_of(self, action: str) -> Plan | None:
        """The plan function of ``action`` (None: not one of this kind's actions, or no plan)."""
        return self.actions.get(action)

    def as_dict(self) -> dict[str, Any]:
        """What ``gameday faults --json`` shows of it (names, no functions)."""
        plans = {action: _name(plan) for action, plan in self.actions.items()}
        return {
            "kind": self.name,
            "role": self.role,
            "summary": self.summary,
            "module": self.module or None,
            "actions": sorted(self.actions),
            "plan": plans,
            "rollback": self.rollback or None,
            "undo": _name(self.undo),
            "arguments": _name(self.parser()) if self.module else None,
            "scan": (
                {"part": self.scan.part, "looks_for": self.scan.looks_for, "place": self.scan.place}
                if self.scan
                else None
            ),
            "ends_by_itself": self.ends_by_itself or None,
            "watchdog": bool(self.ends_by_itself),
            "failpoints": list(self.failpoints),
            "docs": self.docs or None,
            "adopts": self.adopts or None,
        }


def _name(func: Callable[..., Any] | None) -> str | None:
    return f"{func.__module__}.{func.__qualname__}" if func is not None else None
