"""Sidecar actions: change the injector template (undoable), roll out drifted workloads."""

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from chaos_ext._core.contract import (
    LEDGER_ID,
    Configuration,
    Secrets,
    fault_action,
    remedy_action,
    roll_back,
    rollback_activity,
)
from chaos_ext._core.failpoint import failpoint
from chaos_ext._core.k8s import (
    IDENTITY_RULE,
    api_client,
    call,
    cluster_identity,
    read_json,
    status_of,
    undo_api_client,
)
from chaos_ext._core.ledger import Entry, default_ledger, fault, new_entry_id
from chaos_ext._core.rbac import Rule, needs_k8s
from chaos_ext._core.validation import require_name, require_range, validated_by
from chaos_ext.errors import InvalidArgument
from chaos_ext.sidecar import _backup, _observe, _restart, _rollout
from chaos_ext.sidecar._template import changed_data
from chaos_ext.sidecar.errors import SidecarError

__all__ = ["change_sidecar_template", "restore_sidecar_template", "rollout_drifted_workloads"]

TEMPLATE_KIND = "sidecar-template"
ROLLOUT_KIND = "sidecar-rollout"
DEFAULT_PREFIX = "gameday.chaos-ext.io/sidecar"


def _sha(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode()).hexdigest()[:16]


def _pointer(key: str) -> str:
    return "/data/" + key.replace("~", "~0").replace("/", "~1")


def _check_change(args: Mapping[str, Any]) -> None:
    require_name(
        "configmap_name", args.get("configmap_name", "istio-sidecar-injector"), max_len=253
    )
    require_name("configmap_namespace", args.get("configmap_namespace", "istio-system"))
    if not args.get("values_patch") and not args.get("data"):
        raise InvalidArgument(
            "give values_patch (merged into the values JSON) and/or data (whole keys)"
        )
    if args.get("values_patch") is not None and not isinstance(args.get("values_patch"), dict):
        raise InvalidArgument(
            f"values_patch: expected an object, got {args.get('values_patch')!r:.40}"
        )


@fault_action(rollback="restore_sidecar_template")
@needs_k8s(Rule("", "configmaps", ("get", "patch", "create", "delete")), IDENTITY_RULE)
@validated_by(_check_change)
def change_sidecar_template(
    values_patch: dict[str, Any] | None = None,
    data: dict[str, str] | None = None,
    configmap_name: str = "istio-sidecar-injector",
    configmap_namespace: str = "istio-system",
    values_key: str = "values",
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Change the sidecar injector's template/values; the previous text is kept for undo.

    `values_patch` is merged (JSON merge patch) into the JSON of the
    `values_key` key (Istio: `values`, e.g. `{"global": {"tag": "1.23.1"}}`);
    `data` replaces whole keys. Blast radius: only pods created from now on
    get the new sidecar; running pods drift until restarted (see
    `sidecar_drift`, `rollout_drifted_workloads`). Rollback:
    `restore_sidecar_template` puts the changed keys back byte for byte
    (`gameday rollback` does too). The previous text is kept in the ledger
    and, before the patch, in a backup ConfigMap of the same namespace,
    `gameday-backup-<ledger_id>` (label `chaos-ext.gameday/backup:
    sidecar-template`), so `gameday ledger --scan` finds the change even
    with the ledger lost; the undo deletes it. Returns the changed keys,
    their hashes before and after, the backup's name and `ledger_id`.
    """
    _check_change(locals())
    api = api_client(secrets)
    core = client.CoreV1Api(api)
    identity = cluster_identity(api, secrets)
    name, ns = configmap_name, configmap_namespace
    where = f"ConfigMap {ns}/{name}"
    cm = read_json(
        core.read_namespaced_config_map, name, ns, what=f"read {where}", error=SidecarError
    )
    current: dict[str, str] = dict(cm.get("data") or {})
    new = changed_data(current, values_key=values_key, values_patch=values_patch, data=data)
    previous = {key: current.get(key) for key in new}
    entry_id = new_entry_id()  # the backup's name: the recipe is complete when recorded
    recipe = {
        "name": name,
        "namespace": ns,
        "previous": previous,
        "applied_sha256": {k: _sha(v) for k, v in new.items()},
        "backup": _backup.backup_name(entry_id),
    }
    ops: list[dict[str, Any]] = []
    for key, text in new.items():
        if previous[key] is None:
            ops.append({"op": "add", "path": _pointer(key), "value": text})
        else:  # fails if someone changed it since we read it
            ops.append({"op": "test", "path": _pointer(key), "value": previous[key]})
            ops.append({"op": "replace", "path": _pointer(key), "value": text})
    with fault(
        kind=TEMPLATE_KIND,
        target=where,
        recipe=recipe,
        module=__name__,
        identity=identity,
        entry_id=entry_id,
    ) as entry:
        _backup.create_backup(core, entry.id, recipe)
        call(
            core.patch_namespaced_config_map,
            name,
            ns,
            ops,
            what=f"patch {where}",
            error=SidecarError,
            _preload_content=False,
        )
        failpoint(f"{TEMPLATE_KIND}.mid-apply")  # changed, the action not yet returned
    return {
        "configmap": f"{ns}/{name}",
        "changed_keys": sorted(new),
        "previous_sha256": {k: _sha(v) for k, v in previous.items()},
        "new_sha256": recipe["applied_sha256"],
        "backup": f"{ns}/{recipe['backup']}",
        "changed_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        LEDGER_ID: entry.id,
    }


def _undo_template(entry: Entry) -> str:
    """Put the previous text of every changed key back, exactly, then delete the backup."""
    recipe = entry.recipe
    ns = recipe["namespace"]
    if recipe.get("unreadable"):  # an orphan backup that cannot be read (sidecar.leftovers)
        raise SidecarError(
            f"backup ConfigMap {ns}/{recipe['backup']} cannot be read ({recipe['unreadable']}):"
            " restore the injector ConfigMap by hand, then delete the backup"
        )
    core = client.CoreV1Api(undo_api_client(entry.identity))
    note = _restore(core, recipe)
    # entries recorded before backups existed have none
    if recipe.get("backup") and _backup.delete_backup(core, recipe["backup"], ns):
        note += f"; deleted the backup ConfigMap {ns}/{recipe['backup']}"
    return note


def _restore(core: client.CoreV1Api, recipe: Mapping[str, Any]) -> str:
    name, ns = recipe["name"], recipe["namespace"]
    try:
        cm = read_json(
            core.read_namespaced_config_map,
            name,
            ns,
            what=f"read ConfigMap {ns}/{name}",
            error=SidecarError,
        )
    except SidecarError as exc:
        if status_of(exc.__cause__) == 404:
            return f"ConfigMap {ns}/{name} is gone: nothing to restore"
        raise
    current = cm.get("data") or {}
    if all(current.get(key) == text for key, text in recipe["previous"].items()):
        return f"ConfigMap {ns}/{name} already has its previous text (never changed, or restored)"
    ops, touched = _restore_ops(recipe, current)
    failpoint(f"{TEMPLATE_KIND}.mid-undo")
    call(
        core.patch_namespaced_config_map,
        name,
        ns,
        ops,
        what=f"restore ConfigMap {ns}/{name}",
        error=SidecarError,
        _preload_content=False,
    )
    note = f"restored {', '.join(sorted(recipe['previous']))} of ConfigMap {ns}/{name}"
    if touched:
        note += f" (changed again since by someone else: {', '.join(touched)}; overwritten)"
    return note


def _restore_ops(
    recipe: Mapping[str, Any], current: Mapping[str, str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """JSON patch operations putting the previous text back; keys someone else changed."""
    ops: list[dict[str, Any]] = []
    touched = []
    for key, text in recipe["previous"].items():
        if _sha(current.get(key)) != recipe["applied_sha256"].get(key):
            touched.append(key)
        if text is None:
            if key in current:
                ops.append({"op": "remove", "path": _pointer(key)})
        else:
            op = "replace" if key in current else "add"
            ops.append({"op": op, "path": _pointer(key), "value": text})
    return ops, touched


def _check_rollout(args: Mapping[str, Any]) -> None:
    _observe.check_query(args)
    _rollout.annotation_keys(args.get("annotation_prefix", DEFAULT_PREFIX))
    require_range("parallel", args.get("parallel", 2), 1, 32)
    require_range("timeout_seconds", args.get("timeout_seconds", 600), 1, 86_400)
    reason = args.get("reason", "sidecar template drift")
    if not isinstance(reason, str) or not reason.strip() or len(reason) > 200:
        raise InvalidArgument(
            f"reason: {reason!r:.60} must be a short non-empty text (<= 200 chars)"
        )


@rollback_activity
@needs_k8s(Rule("", "configmaps", ("get", "patch", "delete")), IDENTITY_RULE)
@validated_by()
def restore_sidecar_template(
    configmap_name: str = "",
    configmap_namespace: str = "",
    include_dead_runs: bool = False,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Put back the injector ConfigMap keys that change_sidecar_template changed (its rollback).

    Blast radius: only the keys recorded in the gameday ledger by this run's
    changes (``include_dead_runs``: also changes left by runs whose runner is
    dead; another live run's change is never undone, it is listed under
    ``left_alone``); ``configmap_name`` / ``configmap_namespace`` narrow it
    (empty: any). Each key gets its previous text back byte for byte, or is
    removed if it did not exist. Idempotent. Raises RollbackFailed if a
    ConfigMap could not be restored (the entry stays open for ``gameday
    rollback``).
    """
    book = default_ledger()
    recorded = [
        e
        for e in book.open_entries()
        if e.kind == TEMPLATE_KIND
        and (not configmap_name or e.recipe.get("name") == configmap_name)
        and (not configmap_namespace or e.recipe.get("namespace") == configmap_namespace)
    ]
    return roll_back(recorded, book, include_dead_runs=include_dead_runs)


@remedy_action(reason="a rollout is the remedy for drift: restarted pods stay restarted")
@needs_k8s(
    Rule("", "configmaps", ("get",)),
    Rule("", "pods", ("list",), cluster_scoped=True),
    Rule("apps", "replicasets", ("list",), cluster_scoped=True),
    Rule("apps", "deployments", ("get", "patch")),
    Rule("apps", "statefulsets", ("get", "patch")),
    Rule("apps", "daemonsets", ("get", "patch")),
    IDENTITY_RULE,
)
@validated_by(_check_rollout)
def rollout_drifted_workloads(
    container_name: str = "istio-proxy",
    configmap_name: str = "istio-sidecar-injector",
    configmap_namespace: str = "istio-system",
    template_format: str = "istio",
    values_key: str = "values",
    config_key: str = "config",
    include_namespaces: list[str] | None = None,
    exclude_namespaces: list[str] | None = None,
    label_selector: str = "",
    started_before: str = "",
    max_workloads: int = 50,
    include_daemonsets: bool = False,
    parallel: int = 2,
    dry_run: bool = False,
    wait: bool = True,
    timeout_seconds: float = 600,
    annotation_prefix: str = DEFAULT_PREFIX,
    reason: str = "sidecar template drift",
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Restart the workloads whose pods run a sidecar the injector no longer injects.

    Drift is measured as by `sidecar_drift`. Each selected Deployment /
    StatefulSet (DaemonSet with `include_daemonsets`) gets the pod-template
    annotations `<annotation_prefix>.rollout.timestamp` and
    `<annotation_prefix>.rollout.reason` (the reason and the first
    difference), so whoever looks at a restarted pod sees why. At most
    `parallel` rollouts run at once, each awaited until complete (`wait`,
    within `timeout_seconds`). The drift query (the arguments up to
    `max_workloads`) is the same as `sidecar_drift`'s: with `started_before`
    (RFC 3339) only drifted pods started before that time count, and
    `label_selector` narrows the pods looked at. `dry_run` lists what would
    restart and changes nothing. Blast radius: at most `max_workloads`
    workloads, in the included namespaces. Not undone: restarted pods stay
    restarted (the ledger records which).
    """
    _check_rollout(locals())
    query = _observe.check_query(locals())
    keys = _rollout.annotation_keys(annotation_prefix)
    api = api_client(secrets)
    workloads, _, template = _observe.measure(api, query)
    chosen, skipped = _rollout.select_workloads(
        workloads.values(),
        include_namespaces=include_namespaces or [],
        exclude_namespaces=exclude_namespaces or [],
        include_daemonsets=include_daemonsets,
        only_started_before=query.started_before is not None,
    )
    for w in chosen[max_workloads:]:
        skipped.append(
            {
                "kind": w.kind,
                "namespace": w.namespace,
                "name": w.name,
                "drifted": w.drifted,
                "reason": f"max_workloads={max_workloads} reached",
            }
        )
    chosen = chosen[:max_workloads]
    summary = {
        "dry_run": dry_run,
        "annotations": list(keys),
        "expected": template.summary(),
        "drifted_pods": sum(w.drifted for w in workloads.values()),
        "selected": [w.as_dict() for w in chosen],
        "skipped": skipped,
    }
    if dry_run or not chosen:
        return {**summary, "restarted": []}
    targets = [f"{w.kind}/{w.namespace}/{w.name}" for w in chosen]
    recipe = {"workloads": targets, "annotations": list(keys)}
    target = f"{len(targets)} workload(s)"
    identity = cluster_identity(api, secrets)
    with fault(kind=ROLLOUT_KIND, target=target, recipe=recipe, module=__name__, identity=identity):
        outcomes = _restart.restart_all(
            api,
            chosen,
            keys,
            reason,
            parallel=parallel,
            wait=wait,
            timeout_seconds=timeout_seconds,
        )
    unfinished = [o for o in outcomes if o["complete"] is False]
    if unfinished:
        shown = "; ".join(
            f"{o['kind']} {o['namespace']}/{o['name']}: {o['status']}" for o in unfinished[:5]
        )
        raise SidecarError(
            f"{len(unfinished)} rollout(s) not complete within {timeout_seconds:g} s: {shown}"
        )
    return {**summary, "restarted": outcomes}


def _undo_rollout(entry: Entry) -> str:
    """Nothing to undo: a rollout is the remedy, not a fault."""
    return f"not reverted (restarted pods stay restarted): {', '.join(entry.recipe['workloads'])}"
