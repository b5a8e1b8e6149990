"""Envoy test data: the config_dump fixtures and a gateway pod manifest.

Import with ``from support.envoy_dumps import ...`` (fixtures stay in
tests/envoy/conftest.py: the module name ``conftest`` is ambiguous).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "envoy" / "fixtures"
COMPLIANT = FIXTURES / "istio-gateway-edge.json"
DEFAULTS = FIXTURES / "istio-gateway-defaults.json"


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@dataclass
class AdminServer:
    """A stand-in for Envoy's admin port: serves scripted (status, body) per path."""

    url: str
    routes: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)


def gateway_pod(name: str, *, phase: str = "Running", containers: tuple[str, ...] = ("istio-proxy",)
                ) -> dict[str, Any]:  # fmt: skip
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "istio-system",
                     "labels": {"app": "istio-ingressgateway", "istio": "ingressgateway"}},
        "spec": {"containers": [{"name": c, "image": "docker.io/istio/proxyv2:1.22.3"}
                                for c in containers]},
        "status": {"phase": phase},
    }  # fmt: skip
