"""Nodes a drain cordoned, found by the drain's annotation: the system side of
``gameday ledger --scan --kubeconfig``.

``drain_nodes`` cordons each node with ``chaos-ext.gameday/cordoned-by: <ledger id>``
(:data:`chaos_ext.node._drain_plan.CORDON_ANNOTATION`). Every node of the
cluster carrying it is listed, grouped by that id: an open ``node-drain``
entry with that id, recorded in this cluster (its ``kube-system`` uid), owns
them. An orphan drain is undone by the drain's own undo handler, from an
entry with the same id (the handler uncordons only nodes still carrying
this id's mark, and removes ``spec.unschedulable``). Listing is one list
call; nothing is changed.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from chaos_ext._core.k8s import list_items
from chaos_ext._core.ledger import Adoption, Entry, Leftover
from chaos_ext.node._drain_plan import CORDON_ANNOTATION

__all__ = ["find_cordons"]

KIND = "node-drain"
_MODULE = "chaos_ext.node.actions"


def _uid(identity: dict[str, Any]) -> str:
    return str((identity.get("cluster") or {}).get("uid") or "")


def _leftover(drain: str, nodes: list[str], identity: dict[str, Any]) -> Leftover:
    uid = _uid(identity)

    def refers(entry: Entry) -> bool:
        return entry.id == drain and _uid(entry.identity or {}) in ("", uid)

    recipe = {"nodes": nodes, "unschedulable": dict.fromkeys(nodes)}
    return Leftover(
        ref=f"node:{uid[:8]}:{drain}",
        kind=KIND,
        what=f"node(s) {', '.join(nodes)} cordoned by drain {drain} ({CORDON_ANNOTATION})",
        adoption=Adoption(
            kind=KIND,
            module=_MODULE,
            target=f"nodes {','.join(nodes)}",
            recipe=recipe,
            identity=identity,
            entry_id=drain,
        ),
        refers=refers,
    )


def find_cordons(
    api: client.ApiClient, identity: dict[str, Any]
) -> tuple[list[Leftover], list[str]]:
    """Every drain whose mark is on a node of the cluster ``api`` reaches.

    Nothing is left unlooked at: a list that fails raises."""
    drains: dict[str, list[str]] = {}
    for node in list_items(client.CoreV1Api(api).list_node, what="list nodes"):
        meta = node.get("metadata") or {}
        drain = (meta.get("annotations") or {}).get(CORDON_ANNOTATION)
        if drain:
            drains.setdefault(str(drain), []).append(str(meta.get("name")))
    return [_leftover(d, sorted(nodes), identity) for d, nodes in sorted(drains.items())], []
