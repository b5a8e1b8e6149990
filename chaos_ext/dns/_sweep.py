"""Which tables of ours no ledger owns: those a rate-limit sweep may delete.

Ownership is by identity, never by spelling (which entries are on a target
is decided by namespace inode, :func:`chaos_ext._core.targets.identity.entries_on`). A table
is ours to sweep only when no open entry of any ledger on this machine names
it: table names are drawn at random per fault, so a name is the table's
identity wherever it lives and whoever recorded it. A ledger that cannot be
read may own any table: then nothing is swept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos_ext._core.ledger import Census, Entry, open_entries_on_machine
from chaos_ext._core.targets.spec import Target
from chaos_ext.dns import _nft
from chaos_ext.errors import TargetGone

__all__ = ["RATE_KIND", "SweepPlan", "plan_sweep", "remove_unrecorded"]

RATE_KIND = "dns-rate-limit"


@dataclass(frozen=True)
class SweepPlan:
    """The tables to delete, and a note for each table of ours that is left alone."""

    delete: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _owner_note(where: str, table: str, path: Path, entry: Entry) -> str:
    runner = "its runner is alive" if entry.owner_alive() else "its runner is dead"
    return (
        f"{where}: table {table} left alone: open entry {entry.id} ({entry.target}, run"
        f" {entry.run_id}, {runner}) in the ledger at {path} owns it"
    )


def plan_sweep(where: str, present: Sequence[str], owners: Census) -> SweepPlan:
    """What to do with our tables ``present`` on ``where``, given every ledger's open entries."""
    if not present:
        return SweepPlan()
    if owners.unreadable:
        why = "; ".join(owners.unreadable)
        return SweepPlan(
            notes=[
                f"{where}: {len(present)} table(s) of ours left alone: a ledger that cannot be read"
                f" may own them ({why})"
            ]
        )
    named: Mapping[str, tuple[Path, Entry]] = {
        str(entry.recipe.get("table")): (path, entry) for path, entry in owners.entries
    }
    plan = SweepPlan()
    for table in present:
        if table in named:
            plan.notes.append(_owner_note(where, table, *named[table]))
        else:
            plan.delete.append(table)
    return plan


def remove_unrecorded(
    where: Target, configuration: Mapping[str, Any] | None, secrets: Mapping[str, Any] | None
) -> list[str]:
    """Delete our tables on ``where`` that no open entry of any ledger names; what was done."""
    try:
        with _nft.runner_for(where, configuration, secrets) as (runner, _):
            present = _nft.list_ours(runner)  # before the census: a newer table is not seen
            plan = plan_sweep(where.where, present, open_entries_on_machine([RATE_KIND]))
            for table in plan.delete:
                gone = not _nft.delete_table(runner, table)
                what = "was already gone" if gone else "deleted"
                plan.notes.append(f"{where.where}: table {table} without a ledger entry {what}")
    except TargetGone:
        return [f"{where.where}: the target is gone, and any limit with it"]
    return plan.notes
