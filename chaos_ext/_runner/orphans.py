"""What gameday left in the system, checked against every ledger: ``gameday ledger --scan``.

The ledger is not the only source of truth: when it is lost (deleted,
``--repair --accept-loss``), what it recorded is still in the system. A scan
lists gameday's objects from the system itself, then reads every ledger of
the machine (:func:`chaos_ext._core.ledger.open_entries_on_machine`: the current
one, those the markers name, those that registered an open entry on this
boot), in that order, so an object an action is creating now already has
its entry:

=========  ==========================================================  ======
part       found by                                                    needs
=========  ==========================================================  ======
helpers    ``GAMEDAY_HELPER_TOKEN`` in a process's environment          local
nft        tables ``inet gameday_dnsrate_*`` in every network namespace local
nft        tables ``inet gameday_dnserr_*`` in every network namespace  local
qdiscs     root qdisc ``1d1a:`` on any interface of every namespace     local
nodes      annotation ``chaos-ext.gameday/cordoned-by``                 cluster
load Jobs  labels ``app.kubernetes.io/managed-by=gameday,gameday.io/load`` cluster
templates  backup ConfigMaps, label ``chaos-ext.gameday/backup``        cluster
sessions   PostgreSQL ``application_name`` ``gameday-exhaust-<id>``      a DSN
=========  ==========================================================  ======

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
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos_ext._core import helper as _helper
from chaos_ext._core import ledger as fault_ledger
from chaos_ext._core import procfs as _procfs
from chaos_ext._core.ledger import (
    Adoption,
    Census,
    Entry,
    Ledger,
    Leftover,
    UndoOutcome,
    open_entries_on_machine,
    undo_handler,
)
from chaos_ext.errors import ChaosExtError

__all__ = [
    "HELPER_ORPHAN_KIND",
    "Finding",
    "Scan",
    "scan",
    "undo_orphans",
]

HELPER_ORPHAN_KIND = "helper-orphan"
_ENTRY_ID = re.compile(r"^[0-9a-f]{16}$")
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
class Scan:
    """What a scan found, what it looked at, and what it could not look at."""

    findings: list[Finding]
    parts: list[str]
    problems: list[str]

    @property
    def orphans(self) -> list[Finding]:
        return [f for f in self.findings if f.orphan]

    def as_dict(self) -> dict[str, Any]:
        return {
            "parts": self.parts,
            "problems": self.problems,
            "found": [f.as_dict() for f in self.findings],
            "orphans": len(self.orphans),
        }


def _helper_leftover(token: str, pids: list[int]) -> Leftover:
    argv = _procfs.cmdline(pids[0])
    module = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else (argv[0] if argv else "?")

    def refers(entry: Entry) -> bool:
        return entry.id == token

    return Leftover(
        ref=f"helper:{token}",
        kind="helper",
        what=f"helper {module} pid {', '.join(map(str, pids))} (GAMEDAY_HELPER_TOKEN={token})",
        adoption=Adoption(
            kind=HELPER_ORPHAN_KIND,
            module=__name__,
            target=f"helper {module} {token}",
            recipe={"token": token, "pids": pids, "module": module},
        ),
        refers=refers,
    )


def find_helpers() -> tuple[list[Leftover], list[str]]:
    """Every live helper process that holds a fault on this machine, by its token.

    A fault's helper carries its ledger entry's id (16 hex characters); the
    sandbox's own services carry ``sandbox-<prefix>`` (``gameday sandbox down``
    removes them) and are not faults.
    """
    mine = os.getpid()
    found = {t: p for t, p in _helper.all_helpers().items() if _ENTRY_ID.match(t) and mine not in p}
    return [_helper_leftover(token, pids) for token, pids in sorted(found.items())], []


@undo_handler(HELPER_ORPHAN_KIND)
def _undo_helper(entry: Entry) -> str:
    """Stop the helper processes with this token (as every helper-held fault's undo does)."""
    token = str(entry.recipe["token"])
    stopped = _helper.stop_helpers(token)
    if not stopped:
        return f"helper {token} already gone"
    return f"stopped {stopped} helper process(es) with token {token}"


def _local_finders() -> list[tuple[str, Finder]]:
    from chaos_ext.dns.leftovers import (  # noqa: PLC0415 - libnftables on demand
        find_error_tables,
        find_tables,
    )
    from chaos_ext.network.leftovers import find_trees  # noqa: PLC0415 - pyroute2 on demand

    return [
        ("helpers", find_helpers),
        ("nft tables", find_tables),
        ("nft DNS error tables", find_error_tables),
        ("qdiscs", find_trees),
    ]


def _kubernetes_finder(context: str | None) -> tuple[str, Finder]:
    def find() -> tuple[list[Leftover], list[str]]:
        from chaos_ext._core.k8s import api_client, cluster_identity  # noqa: PLC0415
        from chaos_ext.load.leftovers import find_jobs  # noqa: PLC0415
        from chaos_ext.node.leftovers import find_cordons  # noqa: PLC0415
        from chaos_ext.sidecar.leftovers import find_backups  # noqa: PLC0415

        secrets = {"KUBERNETES_CONTEXT": context} if context else {}
        api = api_client(secrets)
        identity = cluster_identity(api, secrets)
        found = [*find_cordons(api, identity), *find_jobs(api, identity)]
        return [*found, *find_backups(api, identity)], []

    return "kubernetes (cordoned nodes, load Jobs, sidecar template backups)", find


def _database_finder(dsn: str) -> tuple[str, Finder]:
    def find() -> tuple[list[Leftover], list[str]]:
        from chaos_ext.db.leftovers import find_sessions  # noqa: PLC0415 - psycopg on demand

        return find_sessions(dsn)

    return "database sessions (PostgreSQL)", find


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
) -> Scan:
    """Find gameday's objects in the system, then whose each one is (see the module doc)."""
    finders = _local_finders() if local else []
    if kubernetes:
        finders.append(_kubernetes_finder(context))
    if db_dsn:
        finders.append(_database_finder(db_dsn))
    leftovers, parts, problems = _run(finders)
    census = open_entries_on_machine()  # after the objects: an object seen has its entry
    return Scan([_owned(lo, census) for lo in leftovers], parts, problems)


def undo_orphans(
    found: Scan, book: Ledger, *, only: Sequence[str] = ()
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
