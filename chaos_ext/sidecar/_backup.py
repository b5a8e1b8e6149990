"""The backup ConfigMap of a sidecar template change: its previous text, kept in the cluster too.

``change_sidecar_template`` records the previous text of every key it
changes in its ledger entry's recipe, and, before it patches the injector,
also in a ConfigMap of the injector's namespace, ``gameday-backup-<ledger
id>``, labelled ``chaos-ext.gameday/backup: sidecar-template``. Its one key,
``recipe.json``, holds exactly what the recipe holds (the injector
ConfigMap's name and namespace, the previous text of each changed key,
``null`` for a key that did not exist, and the sha256 prefix of each text
applied), so the change can be found and undone even with the ledger lost
(:mod:`chaos_ext.sidecar.leftovers`). The undo deletes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kubernetes import client

from chaos_ext._core.k8s import call, status_of
from chaos_ext.sidecar.errors import SidecarError

__all__ = [
    "BACKS_UP_ANNOTATION",
    "LABEL",
    "LABEL_VALUE",
    "LEDGER_ANNOTATION",
    "backup_name",
    "create_backup",
    "delete_backup",
    "recipe_from_backup",
]

LABEL = "chaos-ext.gameday/backup"
LABEL_VALUE = "sidecar-template"
LEDGER_ANNOTATION = "chaos-ext.gameday/ledger-id"
BACKS_UP_ANNOTATION = "chaos-ext.gameday/backs-up"
DATA_KEY = "recipe.json"
_FIELDS = ("name", "namespace", "previous", "applied_sha256")


def backup_name(entry_id: str) -> str:
    """The backup ConfigMap's name for the change recorded as ``entry_id``."""
    return f"gameday-backup-{entry_id}"


def _manifest(entry_id: str, recipe: Mapping[str, Any]) -> dict[str, Any]:
    kept = {field: recipe[field] for field in _FIELDS}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": recipe["backup"],
            "namespace": recipe["namespace"],
            "labels": {LABEL: LABEL_VALUE, "app.kubernetes.io/managed-by": "gameday"},
            "annotations": {
                LEDGER_ANNOTATION: entry_id,
                BACKS_UP_ANNOTATION: f"{recipe['namespace']}/{recipe['name']}",
            },
        },
        "data": {DATA_KEY: json.dumps(kept, indent=1, sort_keys=True) + "\n"},
    }


def create_backup(core: client.CoreV1Api, entry_id: str, recipe: Mapping[str, Any]) -> None:
    """Create the backup ConfigMap of the change ``entry_id`` (its ``recipe``: see the module)."""
    ns, name = recipe["namespace"], recipe["backup"]
    call(
        core.create_namespaced_config_map,
        ns,
        _manifest(entry_id, recipe),
        what=f"create the backup ConfigMap {ns}/{name}",
        error=SidecarError,
        _preload_content=False,
    )


def delete_backup(core: client.CoreV1Api, name: str, ns: str) -> bool:
    """Delete the backup ConfigMap ``ns/name``; False if it was not there."""
    try:
        call(
            core.delete_namespaced_config_map,
            name,
            ns,
            what=f"delete the backup ConfigMap {ns}/{name}",
            error=SidecarError,
            _preload_content=False,
        )
    except SidecarError as exc:
        if status_of(exc.__cause__) == 404:
            return False
        raise
    return True


def _texts(value: Any, what: str) -> dict[str, str | None]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in value.items()
    ):
        raise SidecarError(f"{what}: expected an object of texts (or null), got {value!r:.60}")
    return value


def recipe_from_backup(cm: Mapping[str, Any]) -> dict[str, Any]:
    """The undo recipe a backup ConfigMap holds; SidecarError if it cannot be read."""
    meta = cm.get("metadata") or {}
    where = f"backup ConfigMap {meta.get('namespace')}/{meta.get('name')}"
    text = (cm.get("data") or {}).get(DATA_KEY)
    if not isinstance(text, str):
        raise SidecarError(f"{where}: no {DATA_KEY} key")
    try:
        kept = json.loads(text)
    except ValueError as exc:
        raise SidecarError(f"{where}: {DATA_KEY} is not JSON: {exc}") from exc
    if not isinstance(kept, dict) or not all(isinstance(kept.get(f), str) for f in _FIELDS[:2]):
        raise SidecarError(f"{where}: {DATA_KEY} names no ConfigMap (name, namespace)")
    previous = _texts(kept.get("previous"), f"{where}: previous")
    applied = _texts(kept.get("applied_sha256"), f"{where}: applied_sha256")
    if not previous or set(previous) != set(applied):
        raise SidecarError(f"{where}: previous and applied_sha256 name different keys")
    if kept["namespace"] != meta.get("namespace"):
        raise SidecarError(f"{where}: backs up a ConfigMap of namespace {kept['namespace']!r}")
    return {
        "name": kept["name"],
        "namespace": kept["namespace"],
        "previous": previous,
        "applied_sha256": applied,
        "backup": str(meta.get("name")),
    }
