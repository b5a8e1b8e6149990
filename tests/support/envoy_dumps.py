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


def gateway_pod(
    name: str, *, phase: str = "Running", containers: tuple[str, ...] = ("istio-proxy",)
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "istio-system",
            "labels": {"app": "istio-ingressgateway", "istio": "ingressgateway"},
        },
        "spec": {
            "containers": [
                {"name": c, "image": "docker.io/istio/proxyv2:1.22.3"} for c in containers
            ]
        },
        "status": {"phase": phase},
    }


def envoy_stats(
    *, heap_percent: float, saturated: tuple[str, ...] = (), connections: tuple[int, int] = (0, 0)
) -> bytes:
    """An Envoy ``/stats/prometheus`` page (its format: ``# TYPE`` lines, ``{}`` on
    untagged gauges) for a gateway with the edge overload manager of the fixture.

    ``saturated`` overload actions report active 1 / scale_percent 100; the
    tcp_listener_accept load shed point saturates with stop_accepting_requests.
    """
    lines: list[str] = []

    def gauge(name: str, value: float, tags: str = "") -> None:
        lines.append(f"# TYPE {name} gauge")
        lines.append(f"{name}{{{tags}}} {value:g}")

    actions = (
        "shrink_heap",
        "disable_http_keepalive",
        "stop_accepting_requests",
        "reduce_timeouts",
    )
    for action in actions:
        on = action in saturated
        base = f"envoy_overload_envoy_overload_actions_{action}"
        gauge(f"{base}_active", 1 if on else 0)
        gauge(f"{base}_scale_percent", 100 if on else 0)
    gauge("envoy_overload_envoy_resource_monitors_fixed_heap_pressure", heap_percent)
    lines.append("# TYPE envoy_overload_envoy_resource_monitors_fixed_heap_failed_updates counter")
    lines.append("envoy_overload_envoy_resource_monitors_fixed_heap_failed_updates{} 0")
    gauge(
        "envoy_overload_envoy_resource_monitors_global_downstream_max_connections_pressure",
        round(100 * sum(connections) / 50000, 2),
    )
    shed = 100 if "stop_accepting_requests" in saturated else 0
    gauge("envoy_overload_envoy_load_shed_points_tcp_listener_accept_scale_percent", shed)
    lines.append("# TYPE envoy_http_downstream_cx_active gauge")
    for prefix, count in zip(
        ("outbound_0.0.0.0_8080", "outbound_0.0.0.0_8443"), connections, strict=True
    ):
        lines.append(
            f'envoy_http_downstream_cx_active{{envoy_http_conn_manager_prefix="{prefix}"}} {count}'
        )
    gauge("envoy_server_uptime", 3600)
    return ("\n".join(lines) + "\n").encode()
