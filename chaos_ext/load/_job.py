"""A load from many pods: the Kubernetes Indexed Job (and its Secret) that runs it.

``drive_http_load(..., replicas=N, kubernetes={...})`` creates, in the given
namespace, a Secret holding the load's spec (headers and body included, so
they stay out of the Job object and its pods' specs) and an Indexed Job of N
pods (``completionMode: Indexed``, ``completions = parallelism = N``, no
retries, a deadline). Pod ``JOB_COMPLETION_INDEX = j`` runs
``python -m chaos_ext.load._pod``: shard j of N (see :mod:`._pod`). Both
objects are named ``gameday-load-<ledger id>`` and labelled
``app.kubernetes.io/managed-by: gameday``, ``gameday.io/load: <ledger id>``.

The undo deletes the Job with ``propagationPolicy: Foreground`` (its pods go
first, then the Job) and the Secret; a missing object is fine (idempotent).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from chaos_ext import __version__
from chaos_ext._core.k8s import IDENTITY_RULE
from chaos_ext._core.rbac import Rule
from chaos_ext._core.validation import require_range
from chaos_ext.errors import InvalidArgument
from chaos_ext.load import _pod

__all__ = [
    "DEFAULT_IMAGE",
    "IMAGE_ENV",
    "RULES",
    "JobSettings",
    "job_manifest",
    "job_name",
    "secret_manifest",
    "settings_from",
    "uses_kubernetes",
]

#: ``gameday schedule`` sets this in the runner's pod to the runner's own image
IMAGE_ENV = "GAMEDAY_IMAGE"
DEFAULT_IMAGE = f"gameday:{__version__}"
MAX_REPLICAS = 500
SPEC_KEY = "spec.json"
#: what a load from many pods needs (granted by ``gameday schedule`` only to experiments using it)
RULES = (
    Rule("batch", "jobs", ("create", "delete", "get")),
    Rule("", "secrets", ("create", "delete")),
    IDENTITY_RULE,  # the cluster's identity, recorded in the ledger before the Job exists
)
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|k|M|G)?$")
_KEYS = {
    "namespace",
    "image",
    "pushgateway",
    "pushgateway_read",
    "start_delay_seconds",
    "service_account",
    "cpu",
    "memory",
    "node_selector",
}


@dataclass(frozen=True)
class JobSettings:
    """Where and how the load's pods run (``drive_http_load``'s ``kubernetes`` argument)."""

    pushgateway: str
    namespace: str = "default"
    image: str = ""
    pushgateway_read: str = ""
    start_delay_seconds: float = 30.0
    service_account: str = ""
    cpu: str = "500m"
    memory: str = "256Mi"
    node_selector: Mapping[str, str] = field(default_factory=dict)

    @property
    def read_url(self) -> str:
        """Where gameday reads the results (the pods' URL unless given)."""
        return self.pushgateway_read or self.pushgateway

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "image": self.image,
            "pushgateway": self.pushgateway,
            "pushgateway_read": self.read_url,
            "start_delay_seconds": self.start_delay_seconds,
            "service_account": self.service_account,
            "cpu": self.cpu,
            "memory": self.memory,
            "node_selector": dict(self.node_selector),
        }


def uses_kubernetes(arguments: Mapping[str, Any]) -> bool:
    """Whether drive_http_load's arguments ask for a Job (unknown values count as yes)."""
    replicas = arguments.get("replicas", 1)
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        return True  # "${replicas}": decided at run time
    return replicas > 1 or bool(arguments.get("kubernetes"))


def _url(label: str, value: Any) -> str:
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidArgument(f"kubernetes.{label}: {value!r} is not an http(s):// URL")
    if parts.username or parts.password:
        raise InvalidArgument(f"kubernetes.{label}: credentials in the URL are refused")
    return str(value).rstrip("/")


def _name(label: str, value: Any) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise InvalidArgument(f"kubernetes.{label}: {value!r} is not a DNS-1123 label")
    return value


def _quantity(label: str, value: Any) -> str:
    if not isinstance(value, str) or not _QUANTITY.match(value):
        raise InvalidArgument(f"kubernetes.{label}: {value!r} is not a resource quantity")
    return value


def settings_from(value: Any, replicas: Any) -> JobSettings:
    """Validate ``replicas`` and the ``kubernetes`` mapping; InvalidArgument names the key."""
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        raise InvalidArgument(f"replicas: expected an integer, got {replicas!r}")
    require_range("replicas", replicas, 1, MAX_REPLICAS)
    if not isinstance(value, Mapping) or "pushgateway" not in value:
        raise InvalidArgument(
            "kubernetes: a load from several pods needs a mapping with at least 'pushgateway' "
            "(the URL the pods push results to), e.g. {'namespace': 'gameday', "
            "'pushgateway': 'http://prometheus-pushgateway.monitoring:9091'}"
        )
    unknown = set(value) - _KEYS
    if unknown:
        raise InvalidArgument(f"kubernetes: unknown keys {sorted(unknown)}; known: {sorted(_KEYS)}")
    selector = value.get("node_selector") or {}
    if not isinstance(selector, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in selector.items()
    ):
        raise InvalidArgument("kubernetes.node_selector: expected a mapping of strings")
    image = value.get("image") or os.environ.get(IMAGE_ENV) or DEFAULT_IMAGE
    if not isinstance(image, str) or not image.strip() or any(c.isspace() for c in image):
        raise InvalidArgument(f"kubernetes.image: {image!r} is not an image reference")
    return JobSettings(
        pushgateway=_url("pushgateway", value["pushgateway"]),
        namespace=_name("namespace", value.get("namespace", "default")),
        image=image,
        pushgateway_read=_url("pushgateway_read", value["pushgateway_read"])
        if value.get("pushgateway_read")
        else "",
        start_delay_seconds=float(
            require_range(
                "kubernetes.start_delay_seconds", value.get("start_delay_seconds", 30.0), 1, 600
            )
        ),
        service_account=_name("service_account", value["service_account"])
        if value.get("service_account")
        else "",
        cpu=_quantity("cpu", value.get("cpu", "500m")),
        memory=_quantity("memory", value.get("memory", "256Mi")),
        node_selector=dict(selector),
    )


def job_name(load_id: str) -> str:
    return f"gameday-load-{load_id}"


def _labels(load_id: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "gameday-load",
        "app.kubernetes.io/managed-by": "gameday",
        "gameday.io/load": load_id,
    }


def secret_manifest(
    load_id: str, settings: JobSettings, spec_payload: Mapping[str, Any]
) -> dict[str, Any]:
    """The Secret with the spec (headers and body are secrets of the experiment)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": job_name(load_id),
            "namespace": settings.namespace,
            "labels": _labels(load_id),
        },
        "stringData": {SPEC_KEY: json.dumps(spec_payload, separators=(",", ":"))},
    }


def _container(load_id: str, settings: JobSettings, replicas: int) -> dict[str, Any]:
    secret_ref = {"secretKeyRef": {"name": job_name(load_id), "key": SPEC_KEY}}
    return {
        "name": "load",
        "image": settings.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", "chaos_ext.load._pod"],
        "env": [
            {"name": _pod.ENV_SPEC, "valueFrom": secret_ref},
            {"name": _pod.ENV_SHARDS, "value": str(replicas)},
            {"name": _pod.ENV_LOAD, "value": load_id},
            {"name": _pod.ENV_PUSHGATEWAY, "value": settings.pushgateway},
            {"name": "HOME", "value": "/tmp"},  # noqa: S108 - the pod's emptyDir
        ],
        "resources": {
            "requests": {"cpu": settings.cpu, "memory": settings.memory},
            "limits": {"memory": settings.memory},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],  # noqa: S108 - emptyDir
    }


def job_manifest(
    load_id: str, settings: JobSettings, replicas: int, deadline_seconds: int
) -> dict[str, Any]:
    """The Indexed Job: ``replicas`` pods, shard j in pod ``JOB_COMPLETION_INDEX = j``."""
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [_container(load_id, settings, replicas)],
        "volumes": [{"name": "tmp", "emptyDir": {}}],
        "securityContext": {"runAsUser": 10001, "runAsGroup": 10001},
    }
    if settings.service_account:
        pod["serviceAccountName"] = settings.service_account
    if settings.node_selector:
        pod["nodeSelector"] = dict(settings.node_selector)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(load_id),
            "namespace": settings.namespace,
            "labels": _labels(load_id),
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": replicas,
            "parallelism": replicas,
            "backoffLimit": 0,
            "activeDeadlineSeconds": deadline_seconds,
            "template": {"metadata": {"labels": _labels(load_id)}, "spec": pod},
        },
    }
