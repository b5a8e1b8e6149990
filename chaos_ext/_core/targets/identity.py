"""What a local target really is: its network namespace, by inode, whatever the spelling.

``netns:app``, ``pid:6163`` (a process inside ``app``) and ``netns:alias``
(``ip netns attach alias 6163``) are three spellings of one namespace: the
same nsfs inode behind ``/run/netns/<name>`` and ``/proc/<pid>/ns/net``.
Ownership is decided on that inode, never on the text of a target. A key is
``<boot id>:<st_dev>:<st_ino>``: inodes are reused after a reboot, the boot
id tells them apart.

A sweep of things without a ledger entry asks :func:`may_be_same` whether an
entry could refer to the namespace at hand; an entry whose namespace cannot
be known (recorded before keys were, and its target is gone) may: it is
left alone, never guessed away. Nothing here changes anything.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from chaos_ext._core import procfs as _procfs
from chaos_ext._core.ledger import Entry
from chaos_ext._core.targets.spec import LOCAL_KINDS, Target, netns_path, parse_target
from chaos_ext.errors import InvalidArgument, TargetGone

__all__ = [
    "NETNS_KEY",
    "entries_on",
    "find_namespace",
    "key_of_path",
    "may_be_same",
    "may_enter_namespaces",
    "namespace_key",
    "namespaces",
    "namespaces_out_of_reach",
    "reach",
    "recorded_key",
]

#: The recipe field that keeps the target's namespace key when the fault is made.
NETNS_KEY = "netns_key"
_RUN_NETNS = Path("/run/netns")


def key_of_path(path: str) -> str | None:
    """The key of the namespace behind ``path`` (a netns file); None if it is not there."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return f"{_procfs.boot_id()}:{found.st_dev}:{found.st_ino}"


def namespace_key(target: Target) -> str | None:
    """The key of a local target's namespace now; None if it does not exist.

    ``local`` is this process's own namespace. Remote targets (``ssh:``,
    ``pod:``) have no local namespace: InvalidArgument.
    """
    if target.kind not in LOCAL_KINDS:
        raise InvalidArgument(f"target {target.where} is not on this host: it has no local netns")
    return key_of_path(netns_path(target) or "/proc/self/ns/net")


def recorded_key(recipe: Mapping[str, Any]) -> str | None:
    """The namespace an entry refers to: as recorded, else its target's now (None: unknown)."""
    recorded = recipe.get(NETNS_KEY)
    if isinstance(recorded, str) and recorded:
        return recorded
    try:
        target = parse_target(str(recipe.get("target") or "local"))
    except InvalidArgument:
        return None
    if target.kind not in LOCAL_KINDS:
        return None
    return namespace_key(target)


def may_be_same(recorded: str | None, key: str | None) -> bool:
    """Whether an entry recorded with ``recorded`` may refer to the namespace ``key``.

    Unknown on either side means it may: a sweep leaves such an object alone.
    """
    return recorded is None or key is None or recorded == key


def _recorded_where(recipe: Mapping[str, Any]) -> str | None:
    try:
        return parse_target(str(recipe.get("target") or "local")).where
    except InvalidArgument:
        return None


def entries_on(entries: Sequence[Entry], where: Target) -> list[Entry]:
    """The entries whose fault is on ``where``: the same namespace for a local target
    (by inode, however either is spelled), the same spelling otherwise (or when a
    namespace cannot be known)."""
    key = namespace_key(where) if where.kind in LOCAL_KINDS else None
    found = []
    for entry in entries:
        recorded = recorded_key(entry.recipe) if key is not None else None
        if recorded is not None:
            same = recorded == key
        else:
            same = _recorded_where(entry.recipe) == where.where
        if same:
            found.append(entry)
    return found


def _candidates() -> list[str]:
    named = sorted(str(p) for p in _RUN_NETNS.glob("*")) if _RUN_NETNS.is_dir() else []
    return [*named, *(f"/proc/{p.pid}/ns/net" for p in _procfs.processes())]


def find_namespace(key: str) -> str | None:
    """A path that reaches the namespace ``key`` now (a name first, then a process); None: gone."""
    for path in _candidates():
        if key_of_path(path) == key:
            return path
    return None


def _spelling(path: str) -> Target:
    head, _, tail = path.rpartition("/")
    if head == str(_RUN_NETNS):
        return Target("netns", name=tail)
    return Target("pid", pid=int(path.split("/")[2]))  # /proc/<pid>/ns/net


def reach(target: Target, key: str | None) -> Target:
    """A spelling that reaches the namespace ``key`` now: ``target`` itself if it still does.

    A ``pid:`` target whose process ended may now name another process's
    namespace, or none, while the namespace it was in lives on under a name
    or in another process: that one is returned. TargetGone if the namespace
    is gone; ``key`` None (not recorded) or a remote target: ``target``.
    """
    if not key or target.kind not in LOCAL_KINDS or namespace_key(target) == key:
        return target
    found = find_namespace(key)
    if found is None:
        raise TargetGone(f"the network namespace {target.where} was in ({key}) no longer exists")
    return _spelling(found)


def namespaces() -> list[tuple[str, Target]]:
    """Every network namespace on this machine that this process can look into, once each
    by inode, with a spelling that reaches it (a name under ``/run/netns`` first, else a
    process inside it; its own namespace is ``local`` when it cannot enter namespaces).

    Found through ``/run/netns`` and every process's ``/proc/<pid>/ns/net``:
    a namespace with neither a name there nor a process in it (only a bind
    mount elsewhere) is not seen. Entering another namespace (``setns(2)``) needs
    CAP_SYS_ADMIN: without it only this process's own namespace is returned, and
    :func:`namespaces_out_of_reach` names the others.
    """
    seen = _seen()
    if may_enter_namespaces():
        return seen
    own = namespace_key(Target("local"))
    return [(own, Target("local"))] if own is not None else []


def namespaces_out_of_reach() -> list[Target]:
    """The namespaces :func:`namespaces` leaves out: this process may not enter them (no
    CAP_SYS_ADMIN). Those of other users' processes are not even seen (their
    ``/proc/<pid>/ns/net`` cannot be read), so they are not counted here."""
    if may_enter_namespaces():
        return []
    own = namespace_key(Target("local"))
    return [where for key, where in _seen() if key != own]


def may_enter_namespaces() -> bool:
    """Whether this process may enter another network namespace (CAP_SYS_ADMIN effective)."""
    try:
        return _procfs.has_capability(_procfs.CAP_SYS_ADMIN)
    except OSError:
        return False


def _seen() -> list[tuple[str, Target]]:
    seen: dict[str, Target] = {}
    for path in _candidates():
        key = key_of_path(path)
        if key is not None and key not in seen:
            try:
                seen[key] = _spelling(path)
            except ValueError:
                continue
    return list(seen.items())
