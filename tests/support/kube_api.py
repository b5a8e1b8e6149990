"""A Kubernetes API emulator (kmock) serving discovery for the kinds gameday writes.

(`gameday schedule`'s manifests, `gameday audit envoy --fix istio`'s.)

kubectl needs the API's discovery documents to map kinds to resources, even
for ``apply --dry-run=client``. This runs kmock's in-memory emulator over real
HTTP on a free loopback port, in a background thread, and writes a kubeconfig
pointing at it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import attrs
import kmock
from kmock._internal import rendering

__all__ = ["KINDS", "KubeApi"]

# kind -> (group, version, plural, namespaced)
KINDS = {
    "ConfigMap": ("", "v1", "configmaps", True),
    "ServiceAccount": ("", "v1", "serviceaccounts", True),
    "PersistentVolumeClaim": ("", "v1", "persistentvolumeclaims", True),
    "CronJob": ("batch", "v1", "cronjobs", True),
    "Role": ("rbac.authorization.k8s.io", "v1", "roles", True),
    "RoleBinding": ("rbac.authorization.k8s.io", "v1", "rolebindings", True),
    "ClusterRole": ("rbac.authorization.k8s.io", "v1", "clusterroles", False),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False),
    "Namespace": ("", "v1", "namespaces", False),
    # gameday audit envoy --fix istio
    "Deployment": ("apps", "v1", "deployments", True),
    "EnvoyFilter": ("networking.istio.io", "v1alpha3", "envoyfilters", True),
}
_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
_MAX_RUNTIME_S = 600.0


@attrs.define(kw_only=True)
class _Emulator(kmock.KubernetesEmulator):
    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for kind, (group, version, plural, namespaced) in KINDS.items():
            key = f"{group}/{version}/{plural}" if group else f"{version}/{plural}"
            self.resources[key] = kmock.ResourceInfo(
                kind=kind, namespaced=namespaced, verbs=_VERBS, singular=kind.lower()
            )

    async def _serve_version(self, request: rendering.Request) -> rendering.Payload:
        payload: Any = await super()._serve_version(request)
        payload["groupVersion"] = payload["groupVersion"].lstrip("/")  # the core group is "v1"
        return payload


class KubeApi:
    """A running emulator: ``url``, ``kubeconfig``; ``stop()`` (idempotent)."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        started: Future[str] = Future()
        self._thread = threading.Thread(
            target=self._loop.run_until_complete, args=(self._serve(started),), daemon=True
        )
        self._thread.start()
        self.url = started.result(timeout=30)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kmock", "cluster": {"server": self.url.rstrip("/")}}],
            "users": [{"name": "tester", "user": {"token": "not-a-secret"}}],
            "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "tester"}}],
            "current-context": "kmock",
        }
        kubeconfig.write_text(json.dumps(config))

    async def _serve(self, started: Future[str]) -> None:
        self._stop = asyncio.Event()
        try:
            async with _Emulator() as emulator, kmock.Server(emulator) as server:
                started.set_result(str(server.url))
                await asyncio.wait_for(self._stop.wait(), _MAX_RUNTIME_S)
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)
            raise

    def stop(self) -> None:
        if self._thread.is_alive() and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout=30)
        if not self._loop.is_closed() and not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> KubeApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
