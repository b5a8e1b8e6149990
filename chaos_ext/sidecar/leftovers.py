"""Sidecar template changes, found by their backup ConfigMaps: the system side of
``gameday ledger --scan --kubeconfig``.

``change_sidecar_template`` keeps the previous text of the keys it changes in
a ConfigMap ``gameday-backup-<ledger id>`` of the injector's namespace,
labelled ``chaos-ext.gameday/backup: sidecar-template``
(:mod:`chaos_ext.sidecar._backup`), until its undo deletes it. Every such
ConfigMap of the cluster is listed: an open ``sidecar-template`` entry with
that id, recorded in this cluster (its ``kube-system`` uid), owns it. An
orphan change is undone by the change's own undo handler, from an entry
with the same id whose recipe is rebuilt from the backup: the keys get
their previous text back byte for byte, then the backup is deleted. A
backup that cannot be read is still listed; its undo refuses (restore by
hand). Listing is one list call; nothing is changed.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from chaos_ext._core.k8s import list_items
from chaos_ext._core.ledger import Adoption, Entry, Leftover
from chaos_ext.sidecar import _backup
from chaos_ext.sidecar.errors import SidecarError

__all__ = ["find_backups"]

KIND = "sidecar-template"
_MODULE = "chaos_ext.sidecar.actions"
_SELECTOR = f"{_backup.LABEL}={_backup.LABEL_VALUE}"
_PREFIX = _backup.backup_name("")


def _uid(identity: dict[str, Any]) -> str:
    return str((identity.get("cluster") or {}).get("uid") or "")


def _change_id(meta: dict[str, Any]) -> str:
    named = str((meta.get("annotations") or {}).get(_backup.LEDGER_ANNOTATION) or "")
    name = str(meta.get("name") or "")
    return named or (name[len(_PREFIX) :] if name.startswith(_PREFIX) else name)


def _recipe(cm: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The undo recipe the backup holds and the ConfigMap it backs up (``ns/name``)."""
    meta = cm.get("metadata") or {}
    try:
        recipe = _backup.recipe_from_backup(cm)
    except SidecarError as exc:
        backs_up = str((meta.get("annotations") or {}).get(_backup.BACKS_UP_ANNOTATION) or "?")
        unreadable = {
            "name": backs_up.rpartition("/")[2],
            "namespace": str(meta.get("namespace")),
            "backup": str(meta.get("name")),
            "unreadable": str(exc),
        }
        return unreadable, backs_up
    return recipe, f"{recipe['namespace']}/{recipe['name']}"


def _leftover(cm: dict[str, Any], identity: dict[str, Any]) -> Leftover:
    uid = _uid(identity)
    meta = cm.get("metadata") or {}
    change = _change_id(meta)
    recipe, target = _recipe(cm)

    def refers(entry: Entry) -> bool:
        mine = entry.kind == KIND and entry.id == change
        return mine and _uid(entry.identity or {}) in ("", uid)

    keys = ", ".join(sorted(recipe.get("previous") or {})) or "keys unreadable"
    return Leftover(
        ref=f"sidecar:{uid[:8]}:{change}",
        kind=KIND,
        what=f"ConfigMap {target} changed ({keys}) by change {change}: previous text in"
        f" backup ConfigMap {meta.get('namespace')}/{meta.get('name')} ({_backup.LABEL})",
        adoption=Adoption(
            kind=KIND,
            module=_MODULE,
            target=f"ConfigMap {target}",
            recipe=recipe,
            identity=identity,
            entry_id=change,
        ),
        refers=refers,
    )


def find_backups(
    api: client.ApiClient, identity: dict[str, Any]
) -> tuple[list[Leftover], list[str]]:
    """Every sidecar template change whose backup is in the cluster ``api`` reaches.

    Nothing is left unlooked at: a list that fails raises."""
    found = list_items(
        client.CoreV1Api(api).list_config_map_for_all_namespaces,
        what="list ConfigMaps",
        label_selector=_SELECTOR,
    )
    found.sort(key=lambda cm: _change_id(cm.get("metadata") or {}))
    return [_leftover(cm, identity) for cm in found], []
