"""Plan of the sidecar template change: the keys it would change and the workloads it reaches.

The injector ConfigMap is read and the change computed as
``change_sidecar_template`` computes it (``changed_data``); then every pod
that carries the sidecar is compared with the *changed* template (the drift
analysis of ``sidecar_drift``): those pods' workloads are what the change
reaches (their next pods get the new sidecar; the running ones drift until
restarted). The plan names the backup ConfigMap the change would create
(``gameday-backup-<ledger id>``, the previous text, deleted by the undo). The
API server is asked (access reviews) whether the credentials may read and
patch the ConfigMap and create and delete its backup, as the action and its
undo do. Only get and list calls and access reviews: nothing is patched.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from chaos_ext._core.contract import PlanCall, plan_for, plan_result, preflight_check
from chaos_ext._core.k8s import IDENTITY_RULE, api_client, read_json
from chaos_ext._core.k8s_access import Access, access_checks, accesses
from chaos_ext.errors import ChaosExtError, InvalidArgument
from chaos_ext.sidecar import _drift, _observe
from chaos_ext.sidecar._backup import backup_name
from chaos_ext.sidecar._template import changed_data, template_from_configmap
from chaos_ext.sidecar.actions import _sha, change_sidecar_template
from chaos_ext.sidecar.errors import SidecarError

__all__ = ["plan_change_sidecar_template"]

CONTAINER = "istio-proxy"


def _change_accesses(name: str, namespace: str) -> list[Access]:
    """What ``change_sidecar_template`` and its undo ask of the API (actions.py)."""
    return [
        *accesses(IDENTITY_RULE, why="record the cluster's identity in the ledger"),
        Access("get", "configmaps", namespace=namespace, name=name, why="read the template"),
        Access(
            "patch",
            "configmaps",
            namespace=namespace,
            name=name,
            why="change the template, and put it back (undo)",
        ),
        Access("create", "configmaps", namespace=namespace, why="keep the template's backup"),
        Access("delete", "configmaps", namespace=namespace, why="remove the backup (undo)"),
    ]


@plan_for(change_sidecar_template)
def plan_change_sidecar_template(call: PlanCall) -> dict[str, Any]:
    """The keys ``change_sidecar_template`` would change and the workloads and pods it reaches."""
    a = call.arguments
    configmap_name, configmap_namespace = a["configmap_name"], a["configmap_namespace"]
    values_key = a["values_key"]
    api = api_client(call.secrets)
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    where = f"ConfigMap {configmap_namespace}/{configmap_name}"
    cm = read_json(
        core.read_namespaced_config_map,
        configmap_name,
        configmap_namespace,
        what=f"read {where}",
        error=SidecarError,
    )
    current: dict[str, str] = dict(cm.get("data") or {})
    allowed = access_checks(api, _change_accesses(configmap_name, configmap_namespace))
    try:
        new = changed_data(
            current, values_key=values_key, values_patch=a["values_patch"], data=a["data"]
        )
    except InvalidArgument as exc:  # the change changes nothing: the action refuses it
        return plan_result(
            action="change_sidecar_template",
            targets=[where],
            would=f"refuse: {exc}",
            preflight=[preflight_check("changes something", False, str(exc)), *allowed],
            blast_radius={
                "configmap": f"{configmap_namespace}/{configmap_name}",
                "changed_keys": [],
                "pods_reached": 0,
            },
        )
    changes = sorted(new)
    checks = [preflight_check("changes something", True, f"keys {', '.join(changes)}"), *allowed]
    backup = f"{configmap_namespace}/{backup_name('<ledger id>')}"
    radius: dict[str, Any] = {
        "configmap": f"{configmap_namespace}/{configmap_name}",
        "changed_keys": sorted(new),
        "backup_configmap": backup,
        "previous_sha256": {k: _sha(current.get(k)) for k in new},
        "new_sha256": {k: _sha(v) for k, v in new.items()},
    }
    try:
        template = template_from_configmap(
            {**current, **new}, template_format="istio", values_key=values_key, config_key="config"
        )
    except ChaosExtError as exc:
        checks.append(preflight_check("changed template readable", False, str(exc)))
        return plan_result(
            action="change_sidecar_template",
            targets=[where],
            would=f"create the backup ConfigMap {backup}, patch {where}",
            preflight=checks,
            blast_radius=radius,
        )
    query = _observe.DriftQuery(
        configmap_name=configmap_name,
        configmap_namespace=configmap_namespace,
        values_key=values_key,
    )
    owners = _drift.owners_of_replicasets(_observe._replicasets(apps, (), query.page_size))
    workloads, without = _drift.analyse(
        _observe._pods(core, query), owners, template, container_name=CONTAINER
    )
    reached = sorted(
        (w for w in workloads.values() if w.drifted), key=lambda w: (w.namespace, w.kind, w.name)
    )
    radius.update(
        {
            "expected_after": template.summary(),
            "pods_with_sidecar": sum(w.pods for w in workloads.values()),
            "pods_without_sidecar": without,
            "pods_reached": sum(w.drifted for w in reached),
            "workloads_reached": [
                f"{w.kind}/{w.namespace}/{w.name} ({w.drifted} pod(s))" for w in reached
            ],
        }
    )
    return plan_result(
        action="change_sidecar_template",
        targets=[where],
        would=f"create the backup ConfigMap {backup} (the previous text, deleted by the undo),"
        f" patch {where} ({', '.join(changes)}): new pods of"
        f" {len(reached)} workload(s) get the new sidecar, {radius['pods_reached']}"
        " running pod(s) drift until restarted",
        preflight=checks,
        blast_radius=radius,
    )
