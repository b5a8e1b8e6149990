"""Fixtures for sidecar tests: an emulated mesh with an Istio injector behind the real client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import istio_fixtures as istio
from support import k8s_objects as o
from support.k8s_emulator import EmulatorHandle, emulator  # noqa: F401 - the fixture


@pytest.fixture(autouse=True)
def _isolated_ledger(ledger_path: Path) -> Path:
    return ledger_path


@pytest.fixture
def mesh(emulator: EmulatorHandle) -> dict[str, Any]:  # noqa: F811 - the imported fixture
    """Three nodes, Istio 1.22.3's injector ConfigMap, and injected workloads.

    shop/web (3), shop/cart (2), payments/api (2): Deployments; logging/fluentbit:
    a DaemonSet; kube-system/coredns: not in the mesh. New pods get the sidecar
    that the ConfigMap says at the time they are created.
    """
    nodes = [f"worker-{i}" for i in range(3)]
    values = istio.injector_values(tag="1.22.3")
    emulator.put([o.node(n, {"role": "eat-workers"}) for n in nodes])
    emulator.put(istio.injector_configmap(values))
    emulator.put(istio.mesh_deployment("shop", "web", replicas=3, nodes=nodes, values=values))
    emulator.put(istio.mesh_deployment("shop", "cart", replicas=2, nodes=nodes, values=values))
    emulator.put(istio.mesh_deployment("payments", "api", replicas=2, nodes=nodes, values=values))
    ds = o.daemonset("logging", "fluentbit", nodes=nodes)
    ds[0]["spec"]["template"]["metadata"]["labels"][istio.INJECT_LABEL] = "true"
    emulator.put(ds[0], [istio.inject(p, values) for p in ds[1:]])
    emulator.put(o.deployment("kube-system", "coredns", replicas=2, nodes=nodes))
    emulator.set_injector(istio.injector_from_cluster())
    return {"nodes": nodes, "values": values}
