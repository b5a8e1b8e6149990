"""Load Jobs and their Secrets, found by their labels: the system side of
``gameday ledger --scan --kubeconfig``.

A load run from Kubernetes is an Indexed Job and a Secret, both named
``gameday-load-<ledger id>`` and labelled ``app.kubernetes.io/managed-by: gameday``
and ``gameday.io/load: <ledger id>`` (:mod:`chaos_ext.load._job`). Every
such object of the cluster is listed, grouped by that id: an open ``load``
entry with that id, recorded in this cluster, owns them. An orphan is
undone by the load's own undo handler (``delete_job``: the Job in the
foreground, then the Secret), from an entry with the same id. Listing is
two list calls; nothing is changed.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from chaos_ext._core.k8s import list_items
from chaos_ext._core.ledger import Adoption, Entry, Leftover
from chaos_ext.load._locate import KIND

__all__ = ["find_jobs"]

_MODULE = "chaos_ext.load.actions"
_SELECTOR = "app.kubernetes.io/managed-by=gameday,gameday.io/load"


def _uid(identity: dict[str, Any]) -> str:
    return str((identity.get("cluster") or {}).get("uid") or "")


def _leftover(load: str, namespace: str, kinds: list[str], identity: dict[str, Any]) -> Leftover:
    uid = _uid(identity)

    def refers(entry: Entry) -> bool:
        return entry.id == load and _uid(entry.identity or {}) in ("", uid)

    name = f"{namespace}/gameday-load-{load}"
    recipe = {"mode": "kubernetes", "kubernetes": {"namespace": namespace}}
    return Leftover(
        ref=f"load:{uid[:8]}:{load}",
        kind=KIND,
        what=f"{' and '.join(kinds)} {name} of load {load} (label gameday.io/load)",
        adoption=Adoption(
            kind=KIND, module=_MODULE, target=name, recipe=recipe, identity=identity, entry_id=load
        ),
        refers=refers,
    )


def find_jobs(api: client.ApiClient, identity: dict[str, Any]) -> tuple[list[Leftover], list[str]]:
    """Every load whose Job or Secret is in the cluster ``api`` reaches.

    Nothing is left unlooked at: a list that fails raises."""
    found: dict[tuple[str, str], list[str]] = {}
    lists = (
        ("Job", client.BatchV1Api(api).list_job_for_all_namespaces),
        ("Secret", client.CoreV1Api(api).list_secret_for_all_namespaces),
    )
    for kind, func in lists:
        for item in list_items(func, what=f"list {kind}s", label_selector=_SELECTOR):
            meta = item.get("metadata") or {}
            load = (meta.get("labels") or {}).get("gameday.io/load")
            if load:
                found.setdefault((str(load), str(meta.get("namespace"))), []).append(kind)
    return [_leftover(load, ns, kinds, identity) for (load, ns), kinds in sorted(found.items())], []
