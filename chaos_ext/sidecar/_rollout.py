"""Which drifted workloads to restart, how, and when a rollout is done (pure functions)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from chaos_ext.errors import InvalidArgument
from chaos_ext.sidecar._drift import WorkloadDrift

__all__ = [
    "ROLLABLE",
    "annotation_keys",
    "restart_patch",
    "rollout_status",
    "select_workloads",
]

ROLLABLE = ("Deployment", "StatefulSet", "DaemonSet")
_DNS = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def annotation_keys(prefix: str) -> tuple[str, str]:
    """``<prefix>.rollout.timestamp`` and ``<prefix>.rollout.reason``, checked as annotation keys.

    ``prefix`` is e.g. ``gameday.example.com/sidecar`` (a DNS prefix, ``/``,
    then the start of the name) or a bare ``sidecar-gameday``.
    """
    keys = (f"{prefix}.rollout.timestamp", f"{prefix}.rollout.reason")
    for key in keys:
        dns, _, name = key.rpartition("/")
        ok = (
            bool(_NAME.match(name))
            and len(name) <= 63
            and (not dns or (bool(_DNS.match(dns)) and len(dns) <= 253))
        )
        if not ok:
            raise InvalidArgument(
                f"annotation_prefix: {prefix!r} makes {key!r}, not a valid annotation key"
                " (optional DNS prefix and '/', then at most 63 letters, digits, '-', '_', '.')"
            )
    return keys


def select_workloads(
    drift: Iterable[WorkloadDrift],
    *,
    include_namespaces: Sequence[str],
    exclude_namespaces: Sequence[str],
    include_daemonsets: bool,
    only_started_before: bool,
) -> tuple[list[WorkloadDrift], list[dict[str, Any]]]:
    """(to restart, skipped with reasons), most drifted first.

    A workload is restarted when it has drifted pods (started before the
    given time, with ``only_started_before``), its namespace is selected, and
    it is a Deployment or StatefulSet (DaemonSets only with ``include_daemonsets``).
    """
    chosen, skipped = [], []
    for w in sorted(drift, key=lambda w: (-w.drifted, w.namespace, w.kind, w.name)):
        count = w.drifted_started_before if only_started_before else w.drifted
        reason = None
        if count == 0:
            continue
        if include_namespaces and w.namespace not in include_namespaces:
            reason = "namespace not included"
        elif w.namespace in exclude_namespaces:
            reason = "namespace excluded"
        elif w.kind == "DaemonSet" and not include_daemonsets:
            reason = "DaemonSet (pass include_daemonsets=true)"
        elif w.kind not in ROLLABLE:
            reason = f"a {w.kind} cannot be rolled out (restart its pods yourself)"
        if reason:
            skipped.append(
                {
                    "kind": w.kind,
                    "namespace": w.namespace,
                    "name": w.name,
                    "drifted": count,
                    "reason": reason,
                }
            )
        else:
            chosen.append(w)
    return chosen, skipped


def restart_patch(keys: tuple[str, str], *, timestamp: str, reason: str) -> dict[str, Any]:
    """The pod-template annotations that make the controller roll the pods (and say why)."""
    return {
        "spec": {
            "template": {
                "metadata": {
                    "annotations": {
                        keys[0]: timestamp,
                        keys[1]: reason,
                    }
                }
            }
        }
    }


def rollout_status(obj: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether a workload's rollout is complete, as ``kubectl rollout status`` judges it."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        return False, "waiting for the controller to observe the change"
    if obj.get("kind") == "DaemonSet":
        return _daemonset_status(status)
    replicas = int((obj.get("spec") or {}).get("replicas", 1))
    updated = int(status.get("updatedReplicas") or 0)
    if updated < replicas:
        return False, f"{updated} of {replicas} updated"
    if obj.get("kind") == "StatefulSet":
        return _statefulset_status(status, replicas)
    return _deployment_status(status, updated)


def _deployment_status(status: Mapping[str, Any], updated: int) -> tuple[bool, str]:
    total = int(status.get("replicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    if total > updated:
        return False, f"{total - updated} old replica(s) pending termination"
    if available < updated:
        return False, f"{available} of {updated} updated replicas available"
    return True, f"{updated} replicas updated and available"


def _daemonset_status(status: Mapping[str, Any]) -> tuple[bool, str]:
    desired = int(status.get("desiredNumberScheduled") or 0)
    updated = int(status.get("updatedNumberScheduled") or 0)
    available = int(status.get("numberAvailable") or 0)
    if updated < desired or available < desired:
        return False, f"{updated} of {desired} updated, {available} available"
    return True, f"{desired} pods updated"


def _statefulset_status(status: Mapping[str, Any], replicas: int) -> tuple[bool, str]:
    if status.get("updateRevision") != status.get("currentRevision"):
        return False, "waiting for the update revision to become current"
    ready = int(status.get("readyReplicas") or 0)
    return ready >= replicas, f"{ready} of {replicas} ready"
