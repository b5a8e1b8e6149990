"""Local targets over netlink: this host, a named network namespace, a process's namespace."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from chaos_ext._core import procfs as _procfs
from chaos_ext._core.targets import netns as _netns
from chaos_ext._core.targets.spec import Target, netns_path
from chaos_ext.errors import PreflightFailed, PrivilegeMissing, TargetGone
from chaos_ext.network import _spec, _tree
from chaos_ext.network.errors import NetworkError
from chaos_ext.network.kernel import missing_features

__all__ = [
    "apply",
    "interface_index",
    "preflight",
    "remove_unrecorded",
    "restore",
    "snapshot",
    "state",
    "with_route",
]

T = TypeVar("T")


def _netns_path(target: Target) -> str | None:
    path = netns_path(target)
    if path is not None and not Path(path).exists():
        what = (
            f"network namespace {target.name!r}"
            if target.kind == "netns"
            else f"process {target.pid}"
        )
        raise TargetGone(f"{what} does not exist ({path} is missing)")
    return path


def with_route(target: Target, func: Callable[[IPRoute], T]) -> T:
    """``func(ipr)`` with an IPRoute inside the target's namespace (never creates one).

    Namespaces are entered per thread (see :mod:`chaos_ext._core.targets.netns`).
    """
    path = _netns_path(target)

    def work() -> T:
        try:
            ipr = IPRoute()
        except (OSError, NetlinkError) as exc:
            raise NetworkError(f"cannot open netlink in {target.label('')[:-1]}: {exc}") from exc
        try:
            ipr.status["nlm_generator"] = False
            return func(ipr)
        finally:
            ipr.close()

    return work() if path is None else _netns.run_in_netns(path, work)


def interface_index(ipr: IPRoute, target: Target, interface: str) -> int:
    found = ipr.link_lookup(ifname=interface)
    if not found:
        raise TargetGone(f"interface {interface!r} not found in {target.label(interface)}")
    return int(found[0])


def _has_net_admin() -> bool:
    return _procfs.has_capability(_procfs.CAP_NET_ADMIN)


def preflight(target: Target) -> dict[str, Any]:
    """Raise PreflightFailed naming what is missing; nothing is changed."""
    where = target.label("")[:-1]
    release = os.uname().release
    if not _has_net_admin():
        raise PrivilegeMissing(f"no CAP_NET_ADMIN for {where}: run gameday as root")
    _netns_path(target)
    missing = missing_features()
    if missing:
        raise PreflightFailed(f"kernel {release} on {where} has no {', '.join(missing)}")
    return {"kernel": release, "target": where, "features": ["sch_htb", "sch_netem", "cls_u32"]}


def apply(target: Target, interface: str, spec: _spec.LatencySpec) -> None:
    with_route(
        target, lambda ipr: _tree.apply_tree(ipr, interface_index(ipr, target, interface), spec)
    )


def snapshot(target: Target, interface: str) -> dict[str, Any]:
    return with_route(
        target, lambda ipr: _tree.snapshot(ipr, interface_index(ipr, target, interface))
    )


def restore(target: Target, interface: str, snap: dict[str, Any]) -> str:
    """Put the saved tree back (idempotent) and check it; returns what was done."""
    label = target.label(interface)
    now = snapshot(target, interface)
    if _tree.fingerprint(now) == _tree.fingerprint(snap):
        return f"{label}: qdisc tree already as before"
    # The kernel's default root where a configured one was saved: an earlier restore was
    # cut short after deleting the latency tree (or it was deleted by hand). Either way
    # the tree from before the fault is still owed.
    cut_short = now["default_root"] and not snap["default_root"]
    if not _tree.is_ours(now) and not cut_short:
        return f"{label}: the latency tree is gone and the root was changed since; left alone"
    # a fresh socket for the changes (see _tree.replay)
    with_route(target, lambda ipr: _tree.replay(ipr, interface_index(ipr, target, interface), snap))
    _tree.verify(snap, snapshot(target, interface))
    previous = snap["root_kind"] or "kernel default"
    if cut_short:
        return f"{label}: previous qdisc tree restored ({previous}) after a restore cut short"
    return f"{label}: previous qdisc tree restored ({previous})"


def remove_unrecorded(target: Target, interface: str) -> str:
    """Our latency tree without a ledger entry (ledger lost): delete it, back to the default."""
    label = target.label(interface)

    def work(ipr: IPRoute) -> str:
        index = interface_index(ipr, target, interface)
        if not _tree.is_ours(_tree.snapshot(ipr, index)):
            return f"{label}: no latency tree"
        return "deleted"

    if with_route(target, work) != "deleted":
        return f"{label}: no latency tree"
    with_route(target, lambda ipr: _tree.delete_root(ipr, interface_index(ipr, target, interface)))
    return f"{label}: latency tree without a ledger entry deleted (kernel default root)"


def state(target: Target, interface: str) -> dict[str, Any]:
    snap = snapshot(target, interface)
    return {"target": target.label(interface), "latency_active": _tree.is_ours(snap), **snap}
