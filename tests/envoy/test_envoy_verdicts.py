"""Every default rule's verdict, found value and reported path on both fixtures.

istio-gateway-edge.json follows Envoy's edge best-practices example (through an
Istio gateway's custom bootstrap + EnvoyFilter); istio-gateway-defaults.json is
the same gateway with every edge setting left to Envoy's default (absent).
The expected rows below are written out by hand from the fixtures.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.envoy_dumps import COMPLIANT, DEFAULTS

from chaos_ext.envoy._audit import evaluate
from chaos_ext.envoy._dump import edge_config, select_listeners
from chaos_ext.envoy._input import decode
from chaos_ext.envoy._profiles import effective_rules
from chaos_ext.envoy._report import audit_report
from chaos_ext.envoy._role import detect_role

BOOT = "configs[0].bootstrap"
OM = f"{BOOT}.overload_manager"
RT = f"{BOOT}.layered_runtime.layers"
L8080 = "configs[2].dynamic_listeners[0].active_state.listener"
L8443 = "configs[2].dynamic_listeners[1].active_state.listener"
HCMS = {
    "8080": f"{L8080}.filter_chains[0].filters[0].typed_config",
    "8443-shop": f"{L8443}.filter_chains[0].filters[0].typed_config",
    "8443-api": f"{L8443}.filter_chains[1].filters[0].typed_config",
}
LISTENER_OF = {"8080": "0.0.0.0_8080", "8443-shop": "0.0.0.0_8443", "8443-api": "0.0.0.0_8443"}

C1 = "configs[1].dynamic_active_clusters[0].cluster"

# (rule, listener, found, path) before the HCM rules, in profile order
COMPLIANT_HEAD: list[tuple[str, str | None, Any, str]] = [
    (
        "admin-restricted",
        None,
        {"socket_address": {"address": "127.0.0.1", "port_value": 15000}},
        f"{BOOT}.admin.address",
    ),
    (
        "overload-fixed-heap",
        None,
        "1610612736",
        f"{OM}.resource_monitors[0].typed_config.max_heap_size_bytes",
    ),
    ("overload-shrink-heap", None, 0.9, f"{OM}.actions[0].triggers[0].threshold.value"),
    (
        "overload-stop-accepting-requests",
        None,
        0.95,
        f"{OM}.actions[2].triggers[0].threshold.value",
    ),
    ("listener-buffer-limit", "0.0.0.0_8080", 16384, f"{L8080}.per_connection_buffer_limit_bytes"),
    ("listener-buffer-limit", "0.0.0.0_8443", 32768, f"{L8443}.per_connection_buffer_limit_bytes"),
    ("cluster-buffer-limit", "3 clusters", 32768, f"{C1}.per_connection_buffer_limit_bytes"),
]
# after the first block of HCM rules
COMPLIANT_MIDDLE: list[tuple[str, str | None, Any, str]] = [
    (
        "listener-connection-limit",
        "0.0.0.0_8080",
        2000,
        f'{RT}[1].static_layer.envoy.resource_limits.listener["0.0.0.0_8080"].connection_limit',
    ),
    (
        "listener-connection-limit",
        "0.0.0.0_8443",
        10000,
        f'{RT}[1].static_layer.envoy.resource_limits.listener["0.0.0.0_8443"].connection_limit',
    ),
    (
        "global-downstream-max-connections",
        None,
        "50000",
        f"{OM}.resource_monitors[1].typed_config.max_active_downstream_connections",
    ),
]

# rule -> (field inside the HCM, found on 8080, on 8443 shop chain, on 8443 api chain)
HCM_FIRST: dict[str, tuple[str, Any, Any, Any]] = {
    "use-remote-address": ("use_remote_address", True, True, True),
    "idle-timeout": ("common_http_protocol_options.idle_timeout", "900s", "900s", "900s"),
    "stream-idle-timeout": ("stream_idle_timeout", "300s", "300s", "300s"),
    "request-timeout": ("request_timeout", "300s", "300s", "300s"),
    "http2-max-concurrent-streams": ("http2_protocol_options.max_concurrent_streams", 100, 100, 64),
    "http2-initial-stream-window-size": (
        "http2_protocol_options.initial_stream_window_size",
        65536,
        65536,
        65536,
    ),
    "http2-initial-connection-window-size": (
        "http2_protocol_options.initial_connection_window_size",
        1048576,
        1048576,
        1048576,
    ),
    "headers-with-underscores": (
        "common_http_protocol_options.headers_with_underscores_action",
        "REJECT_REQUEST",
        "REJECT_REQUEST",
        "REJECT_REQUEST",
    ),
}
HCM_LAST: dict[str, tuple[str, Any, Any, Any]] = {
    "normalize-path": ("normalize_path", True, True, True),
    "merge-slashes": ("merge_slashes", True, True, True),
    "escaped-slashes": (
        "path_with_escaped_slashes_action",
        "UNESCAPE_AND_REDIRECT",
        "UNESCAPE_AND_REDIRECT",
        "UNESCAPE_AND_REDIRECT",
    ),
}
# the route rules: one verdict over the 3 routes (one per route config: http.8080 and the two
# 8443 SNI chains' https.443.*), the first route's value and path; both fixtures' routes set
# timeout and idle_timeout 15s
ROUTE = "configs[4].dynamic_route_configs[0].route_config.virtual_hosts[0].routes[0].route"
ROUTE_ROWS: list[tuple[str, str | None, Any, str]] = [
    ("route-idle-timeout", "3 routes", "15s", f"{ROUTE}.idle_timeout"),
    ("route-request-timeout", "3 routes", "15s", f"{ROUTE}.timeout"),
]
ABSENT_PASSES = {"idle-timeout", "stream-idle-timeout", "admin-restricted", "cluster-buffer-limit"}


def _audit(path: Any, profile: str = "envoy-edge") -> dict[str, Any]:
    config = edge_config(decode(path.read_bytes(), origin=str(path)), origin=str(path))
    listeners = select_listeners(config, "", origin=str(path))
    _, rules = effective_rules(profile, None, "")
    return audit_report(
        evaluate(config, listeners, rules),
        source="t",
        listeners=listeners,
        profile=profile,
        role=detect_role(config),
        input_info={},
    )


def _hcm_rows(
    table: dict[str, tuple[str, Any, Any, Any]], found_too: bool
) -> list[tuple[str, str, Any, str]]:
    rows = []
    for rule, (field, *values) in table.items():
        for (chain, path), value in zip(HCMS.items(), values, strict=True):
            where = f"{path}.{field}"
            if rule == "idle-timeout" and not found_too:  # the v2 place is searched too
                where += f" | {path}.idle_timeout"
            rows.append((rule, LISTENER_OF[chain], value if found_too else "absent", where))
    return rows


def test_profile_order_is_the_documents_order() -> None:
    _, rules = effective_rules("envoy-edge", None, "")
    ids = [rule.id for rule in rules]
    expected = [row[0] for row in COMPLIANT_HEAD if row[1] != "0.0.0.0_8443"]
    expected += [
        *HCM_FIRST,
        "listener-connection-limit",
        "global-downstream-max-connections",
        *HCM_LAST,
        "route-idle-timeout",
        "route-request-timeout",
    ]
    assert ids == expected
    assert all(
        rule.cites.startswith("Envoy docs: Configuring Envoy as an edge proxy, ") for rule in rules
    )


def test_compliant_dump_passes_every_rule_with_the_value_and_path_found() -> None:
    report = _audit(COMPLIANT)
    assert report["passed"] is True
    assert report["listeners"] == ["0.0.0.0_8080", "0.0.0.0_8443"]
    assert report["proxy"]["role"] == "gateway"
    assert report["summary"] == {
        "rules": 21,
        "checks": 7 + 11 * 3 + 3 + 2,
        "passed": 45,
        "failed": 0,
        "unreadable": 0,
        "warnings": 0,
        "not_in_input": 0,
        "failed_rules": [],
    }
    got = [(r["rule"], r["listener"], r["found"], r["path"]) for r in report["results"]]
    expected = [
        *COMPLIANT_HEAD,
        *_hcm_rows(HCM_FIRST, True),
        *COMPLIANT_MIDDLE,
        *_hcm_rows(HCM_LAST, True),
        *ROUTE_ROWS,
    ]
    assert got == expected
    assert all(r["status"] == "pass" for r in report["results"])


def test_defaults_dump_fails_every_rule_that_envoys_default_does_not_meet() -> None:
    report = _audit(DEFAULTS)
    assert report["passed"] is False
    failing = {r["rule"] for r in report["results"] if r["status"] == "fail"}
    _, rules = effective_rules("envoy-edge", None, "")
    assert failing == {rule.id for rule in rules} - ABSENT_PASSES - {r[0] for r in ROUTE_ROWS}
    routes = [(r["rule"], r["listener"], r["found"], r["path"]) for r in report["results"]]
    assert routes[-2:] == ROUTE_ROWS
    for row in report["results"]:
        if row["rule"] in ABSENT_PASSES - {"admin-restricted", "cluster-buffer-limit"}:
            assert row["found"] == "absent" and row["status"] == "pass", row
            assert row["note"].startswith("absent: Envoy uses ")
    hcm = [
        (r["rule"], r["listener"], r["found"], r["path"])
        for r in report["results"]
        if r["rule"] in HCM_FIRST or r["rule"] in HCM_LAST
    ]
    assert hcm == _hcm_rows(HCM_FIRST, False) + _hcm_rows(HCM_LAST, False)


def test_hardened_adds_its_rules_with_sources() -> None:
    _, edge = effective_rules("envoy-edge", None, "")
    _, hard = effective_rules("hardened", None, "")
    added = [rule for rule in hard if rule.id not in {r.id for r in edge}]
    assert [rule.id for rule in added] == [
        "overload-disable-http-keepalive",
        "overload-reduce-timeouts",
        "overload-tcp-listener-accept",
        "request-headers-timeout",
        "max-connection-duration",
    ]
    assert all(rule.why and rule.cites and rule.fix for rule in added)
    assert next(r for r in hard if r.id == "listener-connection-limit").unnamed_listener == "fail"
    by_id = {r.id: r for r in hard}
    assert by_id["route-request-timeout"].on_fail == "fail"  # envoy-edge only warns
    assert {r.id: r.on_fail for r in edge}["route-request-timeout"] == "warn"
    assert _audit(COMPLIANT, "hardened")["passed"] is True


@pytest.mark.parametrize(
    ("rule", "expected", "envoy_default"),
    [
        ("listener-buffer-limit", "<= 32768", "1048576 (1 MiB)"),
        ("http2-max-concurrent-streams", "<= 100", "2147483647"),
        ("headers-with-underscores", "REJECT_REQUEST", "ALLOW"),
        ("use-remote-address", "true", "false"),
        ("request-timeout", "> 0s", "disabled"),
        (
            "global-downstream-max-connections",
            "<= 1048576",
            "unlimited (Istio writes 2147483647, which only silences Envoy's warning)",
        ),
    ],
)
def test_report_rows_say_what_was_expected_and_what_envoy_does_by_default(
    rule: str, expected: str, envoy_default: str
) -> None:
    rows = [r for r in _audit(DEFAULTS)["results"] if r["rule"] == rule]
    assert rows and all(
        r["expected"] == expected and r["envoy_default"] == envoy_default for r in rows
    )
