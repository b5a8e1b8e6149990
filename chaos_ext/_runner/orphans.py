"""What gameday left in the system, checked against every ledger: ``gameday ledger --scan``.

The ledger is not the only source of truth: when it is lost (deleted,
``--repair --accept-loss``), what it recorded is still in the system. A scan
lists gameday's objects from the system itself
with the scan each fault kind declares (``FaultKind.scan``: what it looks
for, and whether it needs this machine, a cluster or a database DSN; kinds
sharing a finder share a part, run once), then reads every ledger of the
machine (:func:`chaos_ext._core.ledger.open_entries_on_machine`: the current
one, those the markers name, those that registered an open entry on this
boot), in that order, so an object an action is creating now already has
its entry. ``gameday faults`` lists what each kind's scan looks for.

Each object is *owned* (an open entry of some ledger refers to it: its
ledger, entry, run and whether the runner lives are shown), an *orphan*
(none does), or *unknown* (a ledger that exists could not be read: it may
own it). :func:`undo_orphans` undoes orphans only: each one is recorded in
the current ledger first (an ``Adoption``: the kind's own recipe), then
undone by that kind's own undo handler, so the ledger keeps what was done;
ownership is checked again just before.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos_ext._core import ledger as fault_ledger
from chaos_ext._core.ledger import (
    CLUSTER,
    DATABASE,
    FAULT_KINDS,
    LOCAL,
    Census,
    Entry,
    Ledger,
    Leftover,
    Scan,
    UndoOutcome,
    open_entries_on_machine,
)
from chaos_ext._core.targets import identity
from chaos_ext.errors import ChaosExtError

__all__ = [
    "Finding",
    "Scan",
    "ScanResult",
    "scan",
    "scans",
    "undo_orphans",
]

Finder = Callable[[], tuple[list[Leftover], list[str]]]


@dataclass(frozen=True)
class Finding:
    """One object found, with the open entries that refer to it."""

    leftover: Leftover
    owners: list[tuple[Path, Entry]] = field(default_factory=list)
    unknown: str = ""  # why ownership cannot be decided (an unreadable ledger)

    @property
    def orphan(self) -> bool:
        return not self.owners and not self.unknown

    def status(self) -> str:
        if self.owners:
            return "owned"
        return "unknown" if self.unknown else "orphan"

    def owner_text(self) -> str:
        if self.unknown:
            return f"unknown: {self.unknown}"
        if not self.owners:
            return "orphan"
        path, entry = self.owners[0]
        alive = "alive" if entry.owner_alive() else "dead"
        return (
            f"entry {entry.id} in {path} (run {entry.run_id}, owner pid {entry.owner_pid} {alive})"
        )

    def as_dict(self) -> dict[str, Any]:
        owners = [
            {
                "ledger": str(path),
                "entry": entry.id,
                "run_id": entry.run_id,
                "owner_pid": entry.owner_pid,
                "owner_alive": entry.owner_alive(),
            }
            for path, entry in self.owners
        ]
        status = {"status": self.status(), "owners": owners, "unknown": self.unknown or None}
        return {**self.leftover.as_dict(), **status}


@dataclass(frozen=True)
class ScanResult:
    """What a scan found, what it looked at, and what it could not look at."""

    findings: list[Finding]
    parts: list[str]
    problems: list[str]
    out_of_reach: str | None = None
    """Why part of this machine was not looked at, in one line (None: it all was): the
    network namespaces this process may not enter (no CAP_SYS_ADMIN: not root)."""

    @property
    def orphans(self) -> list[Finding]:
        return [f for f in self.findings if f.orphan]

    def as_dict(self) -> dict[str, Any]:
        return {
            "parts": self.parts,
            "problems": self.problems,
            "out_of_reach": self.out_of_reach,
            "found": [f.as_dict() for f in self.findings],
            "orphans": len(self.orphans),
        }


def scans() -> list[Scan]:
    """Every kind's scan, once per part: this machine's first, then the cluster's, the DB's."""
    parts: dict[str, Scan] = {}
    for kind in FAULT_KINDS.load_all():
        if kind.scan is not None:
            parts.setdefault(kind.scan.part, kind.scan)
    order = {LOCAL: 0, CLUSTER: 1, DATABASE: 2}
    return sorted(parts.values(), key=lambda s: (order[s.place], s.part))


def _kubernetes_finder(found: list[Scan], context: str | None) -> tuple[str, Finder]:
    def find() -> tuple[list[Leftover], list[str]]:
        from chaos_ext._core.k8s import api_client, cluster_identity  # noqa: PLC0415

        secrets = {"KUBERNETES_CONTEXT": context} if context else {}
        api = api_client(secrets)
        identity = cluster_identity(api, secrets)
        leftovers: list[Leftover] = []
        problems: list[str] = []
        for part in found:
            more, trouble = part.find(api, identity)
            leftovers += more
            problems += trouble
        return leftovers, problems

    return f"kubernetes ({', '.join(s.part for s in found)})", find


def _finders(
    local: bool, kubernetes: bool, context: str | None, db_dsn: str | None
) -> list[tuple[str, Finder]]:
    every = scans()
    finders: list[tuple[str, Finder]] = []
    if local:
        finders += [(s.part, s.find) for s in every if s.place == LOCAL]
    cluster = [s for s in every if s.place == CLUSTER]
    if kubernetes and cluster:
        finders.append(_kubernetes_finder(cluster, context))
    if db_dsn:
        finders += [(s.part, _with_dsn(s, db_dsn)) for s in every if s.place == DATABASE]
    return finders


def _with_dsn(part: Scan, dsn: str) -> Finder:
    def find() -> tuple[list[Leftover], list[str]]:
        return part.find(dsn)

    return find


def _owned(leftover: Leftover, census: Census) -> Finding:
    owners = [(path, entry) for path, entry in census.entries if leftover.refers(entry)]
    if owners or not census.unreadable:
        return Finding(leftover, owners)
    why = "; ".join(census.unreadable)
    return Finding(leftover, owners, f"a ledger that cannot be read may own it ({why})")


def _run(finders: Iterable[tuple[str, Finder]]) -> tuple[list[Leftover], list[str], list[str]]:
    leftovers: list[Leftover] = []
    parts: list[str] = []
    problems: list[str] = []
    for part, finder in finders:
        try:
            found, trouble = finder()
        except (ChaosExtError, OSError) as exc:
            problems.append(f"{part}: not looked at: {exc}")
            continue
        parts.append(part)
        leftovers += found
        problems += sorted(set(trouble))
    return leftovers, parts, problems


def scan(
    *,
    local: bool = True,
    kubernetes: bool = False,
    context: str | None = None,
    db_dsn: str | None = None,
) -> ScanResult:
    """Find gameday's objects in the system, then whose each one is (see the module doc)."""
    leftovers, parts, problems = _run(_finders(local, kubernetes, context, db_dsn))
    census = open_entries_on_machine()  # after the objects: an object seen has its entry
    found = [_owned(lo, census) for lo in leftovers]
    return ScanResult(found, parts, problems, _out_of_reach() if local else None)


def _out_of_reach() -> str | None:
    """One line on the network namespaces the local scan could not enter; None: none."""
    if identity.may_enter_namespaces():
        return None
    others = identity.namespaces_out_of_reach()
    if not others and os.getuid() == 0:  # root sees every process: there is no other (a pod)
        return None
    names = ", ".join(t.where for t in others[:5]) + (", ..." if len(others) > 5 else "")
    not_seen = [f"{len(others)} seen ({names})"] if others else []
    who = "not root" if os.getuid() != 0 else "no CAP_SYS_ADMIN"
    if os.getuid() != 0:  # other users' /proc/<pid>/ns/net cannot even be read
        not_seen.append("those of other users' processes")
    return (
        f"{who}: only this process's own network namespace was scanned (entering another "
        f"needs CAP_SYS_ADMIN); not scanned: {' and '.join(not_seen)}; with it (root), "
        "`gameday ledger --scan` scans the whole machine"
    )


def undo_orphans(
    found: ScanResult, book: Ledger, *, only: Sequence[str] = ()
) -> list[tuple[Finding, UndoOutcome | None, str]]:
    """Undo each orphan (only those whose ``ref`` is in ``only``, if given).

    Each is checked once more against every ledger, then recorded in ``book``
    and undone by its kind's undo handler. Returns (finding, outcome or None,
    note) per orphan: None when it was left alone (owned meanwhile, or the
    record failed).
    """
    done: list[tuple[Finding, UndoOutcome | None, str]] = []
    for finding in found.orphans:
        if only and finding.leftover.ref not in only:
            continue
        again = _owned(finding.leftover, open_entries_on_machine())
        if not again.orphan:
            done.append((again, None, f"left alone: {again.owner_text()}"))
            continue
        adoption = finding.leftover.adoption
        try:
            entry = book.record(
                kind=adoption.kind,
                target=adoption.target,
                recipe=adoption.recipe,
                module=adoption.module,
                identity=adoption.identity,
                entry_id=adoption.entry_id,
            )
        except Exception as exc:  # noqa: BLE001 - reported, the next orphan is still tried
            done.append(
                (finding, None, f"not recorded, so not undone: {type(exc).__name__}: {exc}")
            )
            continue
        outcome = fault_ledger.undo(entry, book)
        done.append((finding, outcome, outcome.note))
    return done
