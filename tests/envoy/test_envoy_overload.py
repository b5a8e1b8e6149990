"""overload_state: Envoy overload-manager metrics through a real Prometheus.

Two stand-in gateways serve Envoy's /stats/prometheus format; Debian's
Prometheus scrapes them every second (job "envoy"); the probe goes through
chaos_ext.prometheus's client like every other Prometheus probe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.envoy_dumps import AdminServer, envoy_stats
from support.harness import wait_for

from chaos_ext._core.prometheus_api import client as _client
from chaos_ext._products.sandbox.servers import prometheus
from chaos_ext.envoy._overload import connections_query, overload_query, overload_summary
from chaos_ext.envoy.probes import overload_state
from chaos_ext.errors import EmptyResult, InvalidArgument
from chaos_ext.prometheus.probes import catalog_probe


@pytest.fixture
def gateways(admin_servers: Callable[[], AdminServer]) -> list[AdminServer]:
    pods = [admin_servers(), admin_servers()]
    pods[0].routes["/metrics"] = (200, envoy_stats(heap_percent=62, connections=(30, 120)))
    pods[1].routes["/metrics"] = (200, envoy_stats(heap_percent=55, connections=(10, 80)))
    return pods


@pytest.fixture
def config(gateways: list[AdminServer]) -> Iterator[dict[str, Any]]:
    targets = [pod.url.removeprefix("http://") for pod in gateways]
    with prometheus.start(jobs={"envoy": targets}, scrape_interval="1s") as prom:
        prom.wait_scraped(timeout=30)
        yield {"prometheus_url": prom.url, "prometheus_timeout_seconds": 5}
    _client._cached.cache_clear()


def test_queries_and_summary_are_pure() -> None:
    assert overload_query('{job="envoy"}') == (
        'max by (__name__) ({__name__=~"envoy_overload_envoy_.+_(active|scale_percent|pressure)", '
        'job="envoy"})'
    )
    assert overload_query("") == (
        'max by (__name__) ({__name__=~"envoy_overload_envoy_.+_(active|scale_percent|pressure)"})'
    )
    assert connections_query('{job="envoy"}') == 'sum(envoy_http_downstream_cx_active{job="envoy"})'
    summary = overload_summary(
        {
            "envoy_overload_envoy_overload_actions_shrink_heap_active": 1,
            "envoy_overload_envoy_overload_actions_shrink_heap_scale_percent": 100,
            "envoy_overload_envoy_overload_actions_reduce_timeouts_active": 0,
            "envoy_overload_envoy_overload_actions_reduce_timeouts_scale_percent": 40,
            "envoy_overload_envoy_resource_monitors_fixed_heap_pressure": 96,
            "envoy_overload_envoy_load_shed_points_tcp_listener_accept_scale_percent": 0,
            "envoy_overload_something_else_active": 1,
        },
        12.0,
        "{}",
    )
    assert summary == {
        "selector": "{}",
        "active": 1,
        "active_actions": ["shrink_heap"],
        "stop_accepting_requests": False,
        "actions": {
            "reduce_timeouts": {"active": 0, "scale_percent": 40},
            "shrink_heap": {"active": 1, "scale_percent": 100},
        },
        "pressure_percent": {"fixed_heap": 96},
        "load_shed_points": {"tcp_listener_accept": 0},
        "downstream_connections": 12.0,
    }


def test_overload_actions_engage_and_are_seen(
    gateways: list[AdminServer], config: dict[str, Any]
) -> None:
    calm = overload_state(configuration=config)
    assert calm["active"] == 0 and calm["stop_accepting_requests"] is False
    assert calm["pressure_percent"] == {"fixed_heap": 62, "global_downstream_max_connections": 0.3}
    assert calm["downstream_connections"] == 30 + 120 + 10 + 80
    assert calm["selector"] == '{job="envoy"}'
    assert set(calm["actions"]) == {
        "shrink_heap",
        "disable_http_keepalive",
        "stop_accepting_requests",
        "reduce_timeouts",
    }

    gateways[1].routes["/metrics"] = (
        200,
        envoy_stats(
            heap_percent=99,
            connections=(400, 1600),
            saturated=("shrink_heap", "disable_http_keepalive", "stop_accepting_requests"),
        ),
    )
    wait_for(
        lambda: overload_state(configuration=config)["stop_accepting_requests"],
        20,
        "stop_accepting_requests to be seen active",
    )
    hot = overload_state(configuration=config)
    assert hot["active_actions"] == [
        "disable_http_keepalive",
        "shrink_heap",
        "stop_accepting_requests",
    ]
    assert hot["active"] == 3
    assert hot["actions"]["stop_accepting_requests"] == {"active": 1, "scale_percent": 100}
    assert hot["pressure_percent"]["fixed_heap"] == 99  # the highest of the two gateways
    assert hot["load_shed_points"] == {"tcp_listener_accept": 100}
    assert hot["downstream_connections"] == 30 + 120 + 400 + 1600

    # only the calm gateway
    calm_pod = {"instance": gateways[0].url.removeprefix("http://")}
    assert overload_state(selector=calm_pod, configuration=config)["active"] == 0
    # the catalog entries read the same series
    assert catalog_probe("envoy-stop-accepting-requests", configuration=config) == 1
    assert catalog_probe("envoy-heap-pressure", configuration=config) == 99
    assert catalog_probe("envoy-overload-actions-active", configuration=config) == 3


def test_no_overload_series_is_an_empty_result(config: dict[str, Any]) -> None:
    with pytest.raises(EmptyResult, match=r"found no envoy_overload_\* series.*proxyStatsMatcher"):
        overload_state(job="not-envoy", configuration=config)


def test_bad_selector_is_refused_before_querying() -> None:
    with pytest.raises(InvalidArgument, match="not a Prometheus label name"):
        overload_state(selector={"bad-label": "x"}, configuration={"prometheus_url": "http://x"})
