"""Our latency trees wherever they are: the system side of ``gameday ledger --scan``.

Every interface of every network namespace on the machine (by inode, named
or not) is asked for its root qdisc over netlink; a root with the latency
tree's handle (``1d1a:``, :data:`chaos_ext.network._spec.ROOT_HANDLE`) is
ours. A tree is referred to by an open ``netem`` entry on the same interface
of the same namespace (:class:`chaos_ext.network._sweep.Place`: by inode,
never by spelling; an entry whose namespace cannot be known may be the
one). An orphan has no saved tree to go back to: its undo
(``netem-orphan``) deletes our root, as ``remove_latency``'s sweep does,
and the kernel's default root comes back. Listing changes nothing.
"""

from __future__ import annotations

from pyroute2 import IPRoute
from pyroute2.netlink.rtnl import TC_H_ROOT

from chaos_ext._core import procfs as _procfs
from chaos_ext._core.ledger import Adoption, Entry, Leftover
from chaos_ext._core.targets.identity import NETNS_KEY, namespaces, reach
from chaos_ext._core.targets.spec import Target, parse_target
from chaos_ext.errors import ChaosExtError, TargetGone
from chaos_ext.network import _local, _spec, _sweep

__all__ = ["ORPHAN_KIND", "find_trees"]

KIND = "netem"
ORPHAN_KIND = "netem-orphan"


def _ours(ipr: IPRoute) -> list[str]:
    names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
    return sorted(
        names.get(q["index"], str(q["index"]))
        for q in ipr.get_qdiscs()
        if q["parent"] == TC_H_ROOT and q["handle"] == _spec.ROOT_HANDLE
    )


def _leftover(key: str, where: Target, interface: str) -> Leftover:
    place = _sweep.Place(interface, key)

    def refers(entry: Entry) -> bool:
        return entry.kind == KIND and place.refers(entry)

    inode = key.rsplit(":", 1)[-1]
    recipe = {"target": where.where, "interface": interface, NETNS_KEY: key}
    return Leftover(
        ref=f"qdisc:{inode}:{interface}",
        kind=KIND,
        what=f"latency tree (root qdisc 1d1a:) on {where.label(interface)} (netns inode {inode})",
        adoption=Adoption(
            kind=ORPHAN_KIND, module=__name__, target=where.label(interface), recipe=recipe
        ),
        refers=refers,
    )


def find_trees() -> tuple[list[Leftover], list[str]]:
    """Our latency trees on every interface of every namespace; what could not be read."""
    found: list[Leftover] = []
    problems: list[str] = []
    for key, where in namespaces():
        try:
            interfaces = _local.with_route(where, _ours)
        except (ChaosExtError, OSError) as exc:
            gone = where.kind == "pid" and not _procfs.exists(where.pid)
            if not gone:
                problems.append(f"qdiscs in {where.where}: {exc}")
            continue
        found += [_leftover(key, where, name) for name in interfaces]
    return found, problems


def undo_orphan_tree(entry: Entry) -> str:
    """Delete our latency tree found without an entry (the kernel's default root back)."""
    recipe = entry.recipe
    try:
        where = reach(parse_target(recipe["target"]), recipe.get(NETNS_KEY))
        return _local.remove_unrecorded(where, recipe["interface"])
    except TargetGone as exc:
        return f"{entry.target}: the namespace is gone, and the latency tree with it ({exc})"
