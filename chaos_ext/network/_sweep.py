"""Whose is a latency tree found without a ledger entry: the pure part of remove_latency's sweep.

A latency tree is the root qdisc of one interface in one network
namespace. It is swept (deleted, the kernel's default root back) only when
no open netem entry in any ledger on this machine may refer to it:

* a local target's entries are compared by namespace inode
  (:mod:`chaos_ext._core.targets.identity`), never by spelling: ``netns:app``,
  ``pid:6163`` and a second name of the same namespace are one namespace;
  an entry whose namespace cannot be known may be the one, and is kept;
* a remote target's entries by the host key of the node they were made on
  (any namespace on it: a pod's namespace is not told apart, so kept);
* a ledger that cannot be read may own it: nothing is swept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos_ext._core.ledger import Census, Entry
from chaos_ext._core.targets.identity import may_be_same, recorded_key

__all__ = ["Place", "owner_note"]


@dataclass(frozen=True)
class Place:
    """Where a tree is: an interface, and its namespace key or the node's host key."""

    interface: str
    netns_key: str | None = None
    host_key: str | None = None

    def refers(self, entry: Entry) -> bool:
        """Whether ``entry`` may refer to the tree here (unknown: it may)."""
        recipe: Mapping[str, Any] = entry.recipe
        if recipe.get("interface") != self.interface:
            return False
        ssh = (entry.identity or {}).get("ssh") or {}
        if self.host_key is not None or ssh:
            return ssh.get("host_key") == self.host_key
        return may_be_same(recorded_key(recipe), self.netns_key)


def _owner(census: Census, place: Place) -> tuple[Path, Entry] | None:
    return next(((p, e) for p, e in census.of_kind("netem") if place.refers(e)), None)


def owner_note(label: str, census: Census, place: Place) -> str | None:
    """Why the tree at ``label`` must be left alone; None: nobody owns it, sweep it."""
    if census.unreadable:
        why = "; ".join(census.unreadable)
        return f"{label}: latency tree left alone: a ledger that cannot be read may own it ({why})"
    found = _owner(census, place)
    if found is None:
        return None
    path, entry = found
    runner = "its runner is alive" if entry.owner_alive() else "its runner is dead"
    return (
        f"{label}: latency tree left alone: open entry {entry.id} ({entry.target}, run"
        f" {entry.run_id}, {runner}) in the ledger at {path} owns it"
    )
