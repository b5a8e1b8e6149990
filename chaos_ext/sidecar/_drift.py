"""Sidecar drift: running pods versus what the injector would inject today (pure functions).

:func:`pod_differences` compares one pod's injected sidecar with
:meth:`SidecarTemplate.expected_for` (image, istio-init image, args, env,
resources compared as quantities, revision from ``sidecar.istio.io/status``,
injected annotations). :func:`workload_of` resolves a pod to its workload
through its owners (ReplicaSet -> Deployment via the ReplicaSets listed,
StatefulSet, DaemonSet, Job). :func:`analyse` aggregates per workload and
:func:`report` shapes the JSON the probe returns.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from chaos_ext._core.k8s import parse_time
from chaos_ext.sidecar._template import Expected, SidecarTemplate

__all__ = [
    "STATUS_ANNOTATION",
    "WorkloadDrift",
    "analyse",
    "owners_of_replicasets",
    "pod_differences",
    "report",
    "sidecar_container",
    "workload_of",
]

STATUS_ANNOTATION = "sidecar.istio.io/status"
INIT_NAMES = ("istio-init", "istio-validation")
Manifest = Mapping[str, Any]
WorkloadKey = tuple[str, str, str]  # (kind, namespace, name)


def sidecar_container(pod: Manifest, name: str) -> Manifest | None:
    """The sidecar container, also as a native sidecar (an init container)."""
    spec = pod.get("spec") or {}
    for container in (*(spec.get("containers") or ()), *(spec.get("initContainers") or ())):
        if container.get("name") == name:
            return dict(container)
    return None


@functools.lru_cache(maxsize=4096)
def _quantity(text: str) -> Decimal | str:
    try:
        return Decimal(parse_quantity(text))  # type: ignore[no-untyped-call]
    except (ValueError, TypeError):
        return text


def _resources_differ(have: Manifest, want: Mapping[str, Mapping[str, str]]) -> list[str]:
    found = []
    for section in ("requests", "limits"):
        raw, expected = (have or {}).get(section) or {}, want.get(section) or {}
        if raw == expected:  # the same text is the same quantity: the usual case, no parsing
            continue
        got = {k: _quantity(str(v)) for k, v in raw.items()}
        exp = {k: _quantity(str(v)) for k, v in expected.items()}
        for key in sorted(set(got) | set(exp)):
            if got.get(key) != exp.get(key):
                found.append(
                    f"resources.{section}.{key}: {raw.get(key)!s} != {expected.get(key)!s}"
                )
    return found


def _env_differs(have: Sequence[Manifest], want: Mapping[str, str]) -> list[str]:
    if not want:
        return []
    current = {entry.get("name"): entry.get("value") for entry in have or ()}
    return [
        f"env {name}: {current.get(name)!r} != {value!r}"
        for name, value in want.items()
        if current.get(name) != value
    ]


def _revision_of(annotations: Mapping[str, str]) -> str | None:
    return _revision_in(annotations.get(STATUS_ANNOTATION) or "{}")


@functools.lru_cache(maxsize=1024)
def _revision_in(status_text: str) -> str | None:
    """The revision in a ``sidecar.istio.io/status`` value (the same few texts repeat)."""
    try:
        status = json.loads(status_text)
    except ValueError:
        return None
    revision = status.get("revision") if isinstance(status, dict) else None
    return str(revision) if revision is not None else None


def _image_differs(sidecar: Manifest, want: Expected) -> list[str]:
    if sidecar.get("image") == want.image:
        return []
    return [f"image: {sidecar.get('image')} != {want.image}"]


def _init_images_differ(pod: Manifest, want: Expected) -> list[str]:
    """``istio-init`` / ``istio-validation`` images (when the template has one)."""
    if want.init_image is None:
        return []
    inits = (pod.get("spec") or {}).get("initContainers") or ()
    return [
        f"{init['name']} image: {init.get('image')} != {want.init_image}"
        for init in inits
        if init.get("name") in INIT_NAMES and init.get("image") != want.init_image
    ]


def _args_differ(sidecar: Manifest, want: Expected) -> list[str]:
    """The sidecar's arguments, in order (shown: the expected ones it lacks)."""
    args = tuple(sidecar.get("args") or ())
    if want.args is None or args == want.args:
        return []
    changed = [a for a in want.args if a not in set(args)] or list(want.args)
    return [f"args: expected {' '.join(changed)}"]


def _revision_differs(annotations: Mapping[str, str], want: Expected) -> list[str]:
    """The revision recorded in ``sidecar.istio.io/status`` at injection."""
    if want.revision is None:
        return []
    revision = _revision_of(annotations)
    if revision == want.revision:
        return []
    return [f"revision ({STATUS_ANNOTATION}): {revision} != {want.revision}"]


def _annotations_differ(annotations: Mapping[str, str], want: Expected) -> list[str]:
    """Annotations the injector adds (``injectedAnnotations``)."""
    return [
        f"annotation {key}: {annotations.get(key)!r} != {value!r}"
        for key, value in want.annotations.items()
        if annotations.get(key) != value
    ]


def pod_differences(
    pod: Manifest, sidecar: Manifest, template: SidecarTemplate, limit: int = 8
) -> list[str]:
    """What differs between a pod's injected sidecar and the expected one (first ``limit``).

    The checks, in the order they are reported: sidecar image, init images,
    arguments, environment, resources (as quantities), revision, injected
    annotations. The pod's own ``sidecar.istio.io/*`` overrides are honoured
    (:meth:`SidecarTemplate.expected_for`).
    """
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    want: Expected = template.expected_for(annotations)
    found = [
        *_image_differs(sidecar, want),
        *_init_images_differ(pod, want),
        *_args_differ(sidecar, want),
        *_env_differs(sidecar.get("env") or (), want.env),
        *_resources_differ(sidecar.get("resources") or {}, want.resources),
        *_revision_differs(annotations, want),
        *_annotations_differ(annotations, want),
    ]
    return found[:limit]


def owners_of_replicasets(replicasets: Iterable[Manifest]) -> dict[tuple[str, str], WorkloadKey]:
    """(namespace, ReplicaSet name) -> its controlling workload."""
    owners: dict[tuple[str, str], WorkloadKey] = {}
    for rs in replicasets:
        meta = rs.get("metadata") or {}
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        refs = [r for r in meta.get("ownerReferences") or [] if r.get("controller")]
        owners[ns, name] = (
            (str(refs[0]["kind"]), ns, str(refs[0]["name"])) if refs else ("ReplicaSet", ns, name)
        )
    return owners


def workload_of(pod: Manifest, rs_owners: Mapping[tuple[str, str], WorkloadKey]) -> WorkloadKey:
    """The workload that owns a pod (bare pods are their own workload)."""
    meta = pod.get("metadata") or {}
    ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    refs = [r for r in meta.get("ownerReferences") or [] if r.get("controller")]
    if not refs:
        return ("Pod", ns, name)
    kind, owner = str(refs[0].get("kind")), str(refs[0].get("name"))
    if kind != "ReplicaSet":
        return (kind, ns, owner)
    if (ns, owner) in rs_owners:
        return rs_owners[ns, owner]
    template_hash = (meta.get("labels") or {}).get("pod-template-hash")
    if template_hash and owner.endswith(f"-{template_hash}"):  # RS not listed: the naming rule
        return ("Deployment", ns, owner[: -len(template_hash) - 1])
    return ("ReplicaSet", ns, owner)


@dataclass
class WorkloadDrift:
    """Drift counts of one workload's pods."""

    kind: str
    namespace: str
    name: str
    pods: int = 0
    drifted: int = 0
    started_before: int = 0
    drifted_started_before: int = 0
    example_pod: str = ""
    differences: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "pods": self.pods,
            "drifted": self.drifted,
            "started_before": self.started_before,
            "drifted_started_before": self.drifted_started_before,
            "example_pod": self.example_pod,
            "differences": self.differences,
        }


def _started(pod: Manifest) -> datetime | None:
    status = pod.get("status") or {}
    meta = pod.get("metadata") or {}
    return parse_time(status.get("startTime") or meta.get("creationTimestamp"))


def analyse(
    pods: Iterable[Manifest],
    rs_owners: Mapping[tuple[str, str], WorkloadKey],
    template: SidecarTemplate,
    *,
    container_name: str,
    started_before: datetime | None = None,
) -> tuple[dict[WorkloadKey, WorkloadDrift], int]:
    """Per-workload drift of the pods that carry the sidecar, and how many pods do not."""
    workloads: dict[WorkloadKey, WorkloadDrift] = {}
    without = 0
    for pod in pods:
        sidecar = sidecar_container(pod, container_name)
        if sidecar is None:
            without += 1
            continue
        key = workload_of(pod, rs_owners)
        drift = workloads.get(key) or workloads.setdefault(key, WorkloadDrift(*key))
        drift.pods += 1
        started = _started(pod) if started_before is not None else None  # parsed only if asked
        old = bool(started_before and started and started < started_before)
        drift.started_before += old
        differences = pod_differences(pod, sidecar, template)
        if differences:
            drift.drifted += 1
            drift.drifted_started_before += old
            if not drift.differences:
                drift.example_pod = str((pod.get("metadata") or {}).get("name", ""))
                drift.differences = differences
    return workloads, without


def report(
    workloads: Mapping[WorkloadKey, WorkloadDrift],
    without_sidecar: int,
    template: SidecarTemplate,
    *,
    container_name: str,
    max_workloads: int,
) -> dict[str, Any]:
    """The probe's JSON: totals, then the drifted workloads (most drifted pods first)."""
    values = list(workloads.values())
    drifted = sorted(
        (w for w in values if w.drifted), key=lambda w: (-w.drifted, w.namespace, w.kind, w.name)
    )
    return {
        "container": container_name,
        "expected": template.summary(),
        "pods": sum(w.pods for w in values),
        "pods_without_sidecar": without_sidecar,
        "drifted_pods": sum(w.drifted for w in values),
        "started_before": sum(w.started_before for w in values),
        "workloads": len(values),
        "drifted_workloads": len(drifted),
        "drifted": [w.as_dict() for w in drifted[:max_workloads]],
        "truncated": len(drifted) > max_workloads,
    }
