"""Route-level timeouts: route-idle-timeout and route-request-timeout, one verdict over every
route of the audited listeners, the offending routes named.

The fixtures are the real upstream configurations of tests/envoy/fixtures/upstream (source,
commit and licence of each in SOURCES.md; Envoy and Istio, both Apache-2.0):

* ``istio-ingressgateway-config_dump.json`` (istio/istio istioctl test data, an Istio 1.3
  ingress gateway): listener 0.0.0.0_80's HCM takes its routes from RDS (``http.80``, found in
  ``configs[4].dynamic_route_configs[0]``); virtual host ``*:80`` has 5 routes (path
  /productpage, prefix /static, path /login, path /logout, prefix /api/v1/products), each
  with ``timeout: "0s"``, ``max_grpc_timeout: "0s"``, no ``idle_timeout`` and no
  ``max_stream_duration``; the HCM has no ``common_http_protocol_options``. By hand: the idle
  rule passes (no route sets idle_timeout: the HCM's stream_idle_timeout "0s" applies, which
  stream-idle-timeout fails); the request rule finds all 5 routes unbounded (Istio's default).
* ``envoy-edge-example-*.yaml`` (Envoy's edge best-practices example): one inline route,
  ``prefix /`` of virtual host ``default``, ``idle_timeout: 15s``; ``timeout: 15s`` in the
  newer version, absent (Envoy's 15 s) in the older one. By hand: both rules pass.
* ``istio-waypoint-config_dump.json`` (an ambient waypoint, audited as a gateway): 3 inline
  routes with ``timeout: "0s"`` and ``max_stream_duration: {max_stream_duration: "0s",
  grpc_timeout_header_max: "0s"}``. By hand: unbounded (the route's explicit 0s
  max_stream_duration disables the HCM's too).

Variants (a route config missing, idle_timeout "0s", RDS in a bootstrap) are derived in memory.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from chaos_ext.envoy.probes import edge_config_audit

UPSTREAM = Path(__file__).parent / "fixtures" / "upstream"
GATEWAY_1_3 = UPSTREAM / "istio-ingressgateway-config_dump.json"
EDGE_NEW, EDGE_OLD = "envoy-edge-example-02a45cb9.yaml", "envoy-edge-example-20c559ec.yaml"
Gameday = Callable[..., subprocess.CompletedProcess[str]]

HTTP_80 = "configs[4].dynamic_route_configs[0].route_config.virtual_hosts[0]"
HCM_80 = "configs[2].dynamic_listeners[0].active_state.listener.filter_chains[0].filters[0]"
ISTIO_ROUTES = [
    "http.80 / *:80 / path /productpage",
    "http.80 / *:80 / prefix /static",
    "http.80 / *:80 / path /login",
    "http.80 / *:80 / path /logout",
    "http.80 / *:80 / prefix /api/v1/products",
]
EDGE_ROUTE = "(inline route_config of (unnamed 0.0.0.0:443)) / default / prefix /"
EDGE_ACTION = (
    "bootstrap.static_resources.listeners[0].filter_chains[0].filters[0].typed_config"
    ".route_config.virtual_hosts[0].routes[0].route"
)


def _row(report: dict[str, Any], rule: str) -> dict[str, Any]:
    (row,) = [r for r in report["results"] if r["rule"] == rule]
    return row


def _write(tmp_path: Path, name: str, data: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data) if name.endswith(".json") else yaml.safe_dump(data))
    return str(path)


def _edge(name: str = EDGE_NEW) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((UPSTREAM / name).read_text())
    return data


def _edge_route(data: dict[str, Any]) -> dict[str, Any]:
    hcm = data["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
    route: dict[str, Any] = hcm["typed_config"]["route_config"]["virtual_hosts"][0]["routes"][0]
    return route["route"]  # type: ignore[no-any-return]


def test_istio_gateway_routes_by_hand() -> None:
    report = edge_config_audit(source=str(GATEWAY_1_3))
    idle = _row(report, "route-idle-timeout")
    assert (idle["status"], idle["listener"], idle["found"]) == ("pass", "5 routes", "absent")
    assert idle["path"] == f"{HTTP_80}.routes[0].route.idle_timeout"
    assert idle["note"] == "all 5 routes comply"
    assert _row(report, "stream-idle-timeout")["status"] == "fail"  # what the routes inherit
    request = _row(report, "route-request-timeout")
    assert (request["status"], request["pass"]) == ("warn", True)  # envoy-edge: a finding
    assert (request["found"], request["path"]) == ("0s", f"{HTTP_80}.routes[0].route.timeout")
    assert request["note"] == (
        "5 of 5 routes do not comply: " + "; ".join(ISTIO_ROUTES[:3]) + " and 2 more "
        "(detail.failing)"
    )
    assert request["detail"] == {
        "routes": 5,
        "failed": 5,
        "unreadable": 0,
        "not_in_input": 0,
        "exempt": [],
        "without_upstream": 0,
        "failing": ISTIO_ROUTES,
        "unresolved": [],
    }
    assert "route-request-timeout" not in report["summary"]["failed_rules"]
    assert report["summary"]["warnings"] == 1
    hardened = edge_config_audit(source=str(GATEWAY_1_3), profile="hardened")
    assert _row(hardened, "route-request-timeout")["status"] == "fail"
    assert "route-request-timeout" in hardened["summary"]["failed_rules"]


@pytest.mark.parametrize(("name", "timeout"), [(EDGE_NEW, "15s"), (EDGE_OLD, "absent")])
def test_envoys_edge_example_routes_pass(name: str, timeout: str) -> None:
    report = edge_config_audit(source=str(UPSTREAM / name))
    idle, request = _row(report, "route-idle-timeout"), _row(report, "route-request-timeout")
    assert (idle["status"], idle["found"], idle["path"]) == (
        "pass",
        "15s",
        f"{EDGE_ACTION}.idle_timeout",
    )
    assert (request["status"], request["found"], request["listener"]) == (
        "pass",
        timeout,
        "1 routes",
    )
    assert request["envoy_default"] == "15s"


def test_waypoint_routes_explicit_zero_max_stream_duration_does_not_bound(tmp_path: Path) -> None:
    source = UPSTREAM / "istio-waypoint-config_dump.json"
    failing = [
        "inbound-vip|8000|http|httpbin.default.svc.cluster.local / inbound|http|8000 / default",
        "inbound-vip|8100|http|httpbin.default.svc.cluster.local / inbound|http|8100 / default",
        "encap / inbound|http|0 / default",
    ]
    request = _row(edge_config_audit(source=str(source), role="gateway"), "route-request-timeout")
    assert request["status"] == "warn" and request["detail"]["failing"] == failing
    data = json.loads(source.read_text())  # an HCM max_stream_duration loses to the route's 0s
    for item in data["configs"][3]["dynamic_listeners"]:
        for chain in item["active_state"]["listener"].get("filter_chains", []):
            for net_filter in chain.get("filters", []):
                typed = net_filter.get("typed_config", {})
                if "route_config" in typed:
                    typed["common_http_protocol_options"] = {"max_stream_duration": "300s"}
    report = edge_config_audit(source=_write(tmp_path, "w.json", data), role="gateway")
    assert _row(report, "route-request-timeout")["detail"]["failing"] == failing


def test_a_max_stream_duration_bounds_a_route_without_timeout(tmp_path: Path) -> None:
    data = json.loads(GATEWAY_1_3.read_text())
    listener = data["configs"][2]["dynamic_listeners"][0]["active_state"]["listener"]
    hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
    hcm["common_http_protocol_options"] = {"max_stream_duration": "300s"}
    request = _row(
        edge_config_audit(source=_write(tmp_path, "msd.json", data)), "route-request-timeout"
    )
    assert (request["status"], request["note"]) == ("pass", "all 5 routes comply")
    routes = data["configs"][4]["dynamic_route_configs"][0]["route_config"]["virtual_hosts"][0]
    routes["routes"][1]["route"]["max_stream_duration"] = {"max_stream_duration": "0s"}
    request = _row(
        edge_config_audit(source=_write(tmp_path, "msd0.json", data)), "route-request-timeout"
    )  # the route's own 0s disables the HCM's for that route
    assert request["status"] == "warn" and request["detail"]["failing"] == [ISTIO_ROUTES[1]]
    assert request["path"] == f"{HTTP_80}.routes[1].route.timeout"


def test_missing_route_configs_are_unreadable_never_pass(tmp_path: Path) -> None:
    data = json.loads(GATEWAY_1_3.read_text())
    renamed = copy.deepcopy(data)
    renamed["configs"][4]["dynamic_route_configs"][0]["route_config"]["name"] = "http.81"
    row = _row(edge_config_audit(source=_write(tmp_path, "r.json", renamed)), "route-idle-timeout")
    assert (row["status"], row["pass"], row["listener"]) == ("unreadable", False, "0 routes")
    assert row["path"] == f"{HCM_80}.typed_config.rds.route_config_name"
    assert row["note"] == (
        "route config 'http.80' is not in the dump's RoutesConfigDump (RDS not received?)"
    )
    del data["configs"][4]  # a dump fetched without its routes
    report = edge_config_audit(source=_write(tmp_path, "n.json", data))
    for rule in ("route-idle-timeout", "route-request-timeout"):
        row = _row(report, rule)
        assert row["status"] == "unreadable" and "the dump has no RoutesConfigDump" in row["note"]
        assert rule in report["summary"]["failed_rules"]


def test_a_bootstrap_with_rds_leaves_routes_not_in_input(tmp_path: Path) -> None:
    data = _edge()
    hcm = data["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
    del hcm["typed_config"]["route_config"]
    hcm["typed_config"]["rds"] = {"route_config_name": "edge", "config_source": {"ads": {}}}
    report = edge_config_audit(source=_write(tmp_path, "rds.yaml", data))
    row = _row(report, "route-request-timeout")
    assert (row["status"], row["pass"]) == ("not-in-input", True)
    assert (
        row["note"] == "route config 'edge' comes from RDS at run time: audit the live /config_dump"
    )
    assert report["summary"]["not_in_input"] == 2
    golden = UPSTREAM / "istio-bootstrap-default-golden.json"  # listeners from LDS too
    row = _row(edge_config_audit(source=str(golden), role="gateway"), "route-idle-timeout")
    assert (row["status"], row["listener"]) == ("not-in-input", "(from LDS)")


def test_a_disabled_route_idle_timeout_fails_unless_exempt(
    gameday: Gameday, tmp_path: Path
) -> None:
    data = _edge()
    _edge_route(data)["idle_timeout"] = "0s"
    source = _write(tmp_path, "sse.yaml", data)
    row = _row(edge_config_audit(source=source), "route-idle-timeout")
    assert (row["status"], row["found"], row["path"]) == (
        "fail",
        "0s",
        f"{EDGE_ACTION}.idle_timeout",
    )
    assert row["note"] == f"1 of 1 routes do not comply: {EDGE_ROUTE}"
    result = gameday("audit", "envoy", "--source", source)
    assert result.returncode == 1
    assert "route-idle-timeout" in result.stdout and "1 of 1 routes do not comply" in (
        " ".join(result.stdout.split())
    )
    rules = tmp_path / "streaming.yaml"
    rules.write_text(
        "rules:\n  - id: route-idle-timeout\n"
        "    exempt_routes: ['(inline route_config of *) / default / prefix /']\n"
    )
    result = gameday("audit", "envoy", "--source", source, "--rules", str(rules), "--json")
    assert result.returncode == 0, result.stdout
    row = _row(json.loads(result.stdout), "route-idle-timeout")
    assert row["status"] == "pass" and row["detail"]["exempt"] == [EDGE_ROUTE]
    assert row["note"] == "all 1 routes comply, 1 exempt (exempt_routes)"


def test_fix_envoy_leaves_route_timeouts_to_the_operator(gameday: Gameday, tmp_path: Path) -> None:
    """The route rules have no fix: --fix envoy says what to do by hand, and which routes."""
    data = _edge()
    _edge_route(data)["idle_timeout"] = "0s"
    data["static_resources"]["listeners"][0]["per_connection_buffer_limit_bytes"] = 1048576
    out = tmp_path / "fix"
    result = gameday(
        "audit", "envoy", "--source", _write(tmp_path, "e.yaml", data), "--fix", "envoy",
        "-o", str(out),
    )  # fmt: skip
    assert result.returncode == 2, result.stderr  # incomplete: the route is manual work
    readme = (out / "README.md").read_text()
    assert "- manual: route-idle-timeout: set the route's idle_timeout" in readme
    assert f"list it in exempt_routes; 1 route(s): {EDGE_ROUTE}\n" in readme
    assert "listener-buffer-limit" in readme.split("## Files")[0]  # fixed in place
    patched = yaml.safe_load((out / "envoy-bootstrap.patched.yaml").read_text())
    assert _edge_route(patched)["idle_timeout"] == "0s"  # the route is left as it was


def test_fix_istio_lists_unbounded_routes_for_review(gameday: Gameday, tmp_path: Path) -> None:
    out = tmp_path / "fix"
    result = gameday(
        "audit", "envoy", "--source", str(GATEWAY_1_3), "--fix", "istio", "-o", str(out),
        "--memory-limit", "1024Mi",
    )  # fmt: skip
    readme = (out / "README.md").read_text()
    review = readme.split("## Warnings to review by hand (no fix is written for them)")[1]
    assert review.lstrip().startswith("- route-request-timeout: give the route a timeout")
    assert "VirtualService http[].timeout" in review
    assert f"; 5 route(s): {'; '.join(ISTIO_ROUTES)}\n" in review  # all named, for the operator
    caveats = readme.split("## Not done, or to check first")[1].split("## ")[0]
    assert "route-request-timeout" not in caveats  # a warning does not make the fix incomplete
    assert "review by hand: route-request-timeout" in " ".join(result.stderr.split())


def test_scoped_routes_are_unreadable_not_passed(tmp_path: Path) -> None:
    data = json.loads(GATEWAY_1_3.read_text())
    listener = data["configs"][2]["dynamic_listeners"][0]["active_state"]["listener"]
    hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
    del hcm["rds"]
    hcm["scoped_routes"] = {"name": "scopes", "scoped_rds": {"scoped_rds_config_source": {}}}
    row = _row(edge_config_audit(source=_write(tmp_path, "s.json", data)), "route-idle-timeout")
    assert row["status"] == "unreadable" and row["path"] == f"{HCM_80}.typed_config.scoped_routes"
    assert row["note"] == "scoped routes (scoped_routes, SRDS) are not read by this audit"


def test_lean_reading_keeps_only_the_route_configs_a_listener_names() -> None:
    from chaos_ext.envoy._input import decode  # noqa: PLC0415

    source = UPSTREAM / "istio-sidecar-productpage-config_dump.json"
    full = decode(source.read_bytes(), origin="x", lean=False).data["configs"][3]
    lean = decode(source.read_bytes(), origin="x").data["configs"][3]
    assert len(full["dynamic_route_configs"]) == 14
    kept = [item["route_config"]["name"] for item in lean["dynamic_route_configs"]]
    assert kept == [item["route_config"]["name"] for item in full["dynamic_route_configs"]]
    first = lean["dynamic_route_configs"][0]["route_config"]["virtual_hosts"][0]
    assert first == {  # domains, retry policies, per_filter_config: not built
        "name": "istio-pilot.istio-system.svc.cluster.local:8080",
        "routes": [
            {"match": {"prefix": "/"}, "route": {"timeout": "0s", "max_grpc_timeout": "0s"}}
        ],
    }
    data = json.loads(GATEWAY_1_3.read_text())
    extra = copy.deepcopy(data["configs"][4]["dynamic_route_configs"][0])
    extra["route_config"]["name"] = "nobody-routes-here"
    data["configs"][4]["dynamic_route_configs"].append(extra)
    lean = decode(json.dumps(data).encode(), origin="x").data["configs"][4]
    assert [i["route_config"]["name"] for i in lean["dynamic_route_configs"]] == ["http.80"]


def test_any_rule_can_warn_instead_of_failing() -> None:
    report = edge_config_audit(
        source=str(GATEWAY_1_3), rules=[{"id": "stream-idle-timeout", "on_fail": "warn"}]
    )
    row = _row(report, "stream-idle-timeout")
    assert (row["status"], row["found"]) == ("warn", "0s")
    assert "stream-idle-timeout" not in report["summary"]["failed_rules"]
    request = _row(report, "route-request-timeout")
    assert request["expected"] == "> 0s, or max_stream_duration > 0s"
