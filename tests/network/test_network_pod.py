"""Pod target: pod -> node, node address and container, with the real kubernetes client
against kmock's Kubernetes API emulator served over HTTP."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import kmock
import pytest

from chaos_ext._core.rbac import Rule, rbac_of
from chaos_ext._core.targets import pod as _pod
from chaos_ext._core.targets.spec import parse_target, require_container_id
from chaos_ext.errors import InvalidArgument, KubernetesError, TransportError
from chaos_ext.network import actions

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web-1", "namespace": "shop"},
    "spec": {"nodeName": "node-a", "containers": [{"name": "app"}, {"name": "proxy"}]},
    "status": {
        "containerStatuses": [
            {
                "name": "app",
                "containerID": "containerd://" + "ab12" * 16,
                "ready": True,
                "image": "shop/web:1",
                "imageID": "sha256:" + "1" * 64,
                "restartCount": 0,
            },
            {
                "name": "proxy",
                "containerID": "containerd://" + "cd34" * 16,
                "ready": True,
                "image": "envoy:1",
                "imageID": "sha256:" + "2" * 64,
                "restartCount": 0,
            },
        ]
    },
}
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-a"},
    "status": {
        "addresses": [
            {"type": "Hostname", "address": "node-a"},
            {"type": "InternalIP", "address": "192.0.2.10"},
        ]
    },
}
PENDING = {
    **POD,
    "metadata": {"name": "web-2", "namespace": "shop"},
    "spec": {"containers": [{"name": "app"}]},
    "status": {"phase": "Pending"},
}


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """kmock serving a pod and its node; yields the secrets that point the real client at it."""
    loop = asyncio.new_event_loop()
    started: Future[str] = Future()
    stop: list[asyncio.Event] = []

    async def serve() -> None:
        stop.append(asyncio.Event())
        emulator = kmock.KubernetesEmulator()
        emulator.objects["v1/pods", "shop", "web-1"] = POD
        emulator.objects["v1/pods", "shop", "web-2"] = PENDING
        emulator.objects["v1/nodes", None, "node-a"] = NODE
        async with emulator, kmock.Server(emulator) as server:
            started.set_result(str(server.url))
            await asyncio.wait_for(stop[0].wait(), 120)

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    url = started.result(timeout=30)
    # no kubeconfig: the client is configured from the activity's secrets (KUBERNETES_HOST)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    yield {"KUBERNETES_HOST": url.rstrip("/"), "KUBERNETES_API_KEY": "emulator-token"}
    loop.call_soon_threadsafe(stop[0].set)
    thread.join(10)


def test_pod_resolves_to_node_address_and_container(cluster: dict[str, str]) -> None:
    placement = _pod.resolve_pod(parse_target("pod:shop/web-1"), cluster)
    assert (placement.node, placement.node_address) == ("node-a", "192.0.2.10")
    assert placement.container == "app" and placement.container_id == "ab12" * 16
    assert placement.runtime == "containerd"
    proxy = _pod.resolve_pod(parse_target("pod:shop/web-1/proxy"), cluster)
    assert proxy.container_id == "cd34" * 16


def test_pod_errors_are_clear(cluster: dict[str, str]) -> None:
    with pytest.raises(KubernetesError, match="read pod shop/nope: HTTP 404"):
        _pod.resolve_pod(parse_target("pod:shop/nope"), cluster)
    with pytest.raises(TransportError, match="not scheduled"):
        _pod.resolve_pod(parse_target("pod:shop/web-2"), cluster)
    with pytest.raises(TransportError, match="no running container 'db'"):
        _pod.resolve_pod(parse_target("pod:shop/web-1/db"), cluster)


def test_container_ids_are_checked_before_use() -> None:
    with pytest.raises(InvalidArgument):
        require_container_id("abc; reboot")


def test_pod_targets_declare_their_rbac() -> None:
    rules: tuple[Rule, ...] = rbac_of(actions.add_latency)
    assert Rule("", "pods", ("get",)) in rules
    assert Rule("", "nodes", ("get",), cluster_scoped=True) in rules


def test_unknown_pod_fails_before_any_ssh(cluster: dict[str, str], ledger_path: Path) -> None:
    args: dict[str, Any] = {
        "interface": "eth0",
        "delay_seconds": 0.1,
        "destinations": ["10.0.0.0/8"],
    }
    with pytest.raises(KubernetesError, match="404"):
        actions.add_latency(**args, target="pod:shop/nope", secrets=cluster)
