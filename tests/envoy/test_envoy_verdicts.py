"""Every default rule's verdict, found value and reported path on both fixtures.

istio-gateway-edge.json follows Envoy's edge best-practices example (through an
Istio gateway's custom bootstrap + EnvoyFilter); istio-gateway-defaults.json is
the same gateway with every edge setting left to Envoy's default (absent).
The expected rows below are written out by hand from the fixtures.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.envoy_dumps import COMPLIANT, DEFAULTS, load

from chaos_ext.envoy._audit import audit_report, evaluate
from chaos_ext.envoy._dump import edge_config, select_listeners
from chaos_ext.envoy._rules import default_rules

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

FH = '[?name = "envoy.resource_monitors.fixed_heap"]'

# (rule, listener, found, path) for the global and listener rules of the compliant dump
COMPLIANT_ROWS: list[tuple[str, str | None, Any, str]] = [
    ("overload-fixed-heap", None, "1610612736",
     f"{OM}.resource_monitors[0].typed_config.max_heap_size_bytes"),
    ("overload-shrink-heap", None, 0.9, f"{OM}.actions[0].triggers[0].threshold.value"),
    ("overload-stop-accepting-requests", None, 0.95,
     f"{OM}.actions[2].triggers[0].threshold.value"),
    ("overload-disable-http-keepalive", None, 0.92, f"{OM}.actions[1].triggers[0].threshold.value"),
    ("overload-reduce-timeouts", None,
     {"timer": "HTTP_DOWNSTREAM_CONNECTION_IDLE", "min_timeout": "2s"},
     f"{OM}.actions[3].typed_config.timer_scale_factors[0]"),
    ("overload-tcp-listener-accept", None,
     [{"name": "envoy.resource_monitors.fixed_heap", "threshold": {"value": 0.95}}],
     f"{OM}.loadshed_points[0].triggers"),
    ("global-downstream-max-connections", None, "50000",
     f"{OM}.resource_monitors[1].typed_config.max_active_downstream_connections"),
    ("listener-connection-limit", "0.0.0.0_8080", 2000,
     f'{RT}[1].static_layer.envoy.resource_limits.listener["0.0.0.0_8080"].connection_limit'),
    ("listener-connection-limit", "0.0.0.0_8443", 10000,
     f'{RT}[1].static_layer.envoy.resource_limits.listener["0.0.0.0_8443"].connection_limit'),
    ("listener-buffer-limit", "0.0.0.0_8080", 16384, f"{L8080}.per_connection_buffer_limit_bytes"),
    ("listener-buffer-limit", "0.0.0.0_8443", 32768, f"{L8443}.per_connection_buffer_limit_bytes"),
]  # fmt: skip

# rule -> (field inside the HCM, found on 8080, on 8443 shop chain, on 8443 api chain)
HCM_ROWS: dict[str, tuple[str, Any, Any, Any]] = {
    "http2-max-concurrent-streams": ("http2_protocol_options.max_concurrent_streams", 100, 100, 64),
    "http2-initial-stream-window-size":
        ("http2_protocol_options.initial_stream_window_size", 65536, 65536, 65536),
    "http2-initial-connection-window-size":
        ("http2_protocol_options.initial_connection_window_size", 1048576, 1048576, 1048576),
    "request-headers-timeout": ("request_headers_timeout", "10s", "10s", "10s"),
    "stream-idle-timeout": ("stream_idle_timeout", "300s", "300s", "300s"),
    "request-timeout": ("request_timeout", "300s", "300s", "300s"),
    "idle-timeout": ("common_http_protocol_options.idle_timeout", "900s", "900s", "900s"),
    "max-connection-duration":
        ("common_http_protocol_options.max_connection_duration", "3600s", "3600s", "3600s"),
    "headers-with-underscores": ("common_http_protocol_options.headers_with_underscores_action",
                                 "REJECT_REQUEST", "REJECT_REQUEST", "REJECT_REQUEST"),
    "use-remote-address": ("use_remote_address", True, True, True),
    "normalize-path": ("normalize_path", True, True, True),
    "merge-slashes": ("merge_slashes", True, True, True),
    "escaped-slashes": ("path_with_escaped_slashes_action",
                        "UNESCAPE_AND_REDIRECT", "UNESCAPE_AND_REDIRECT", "UNESCAPE_AND_REDIRECT"),
}  # fmt: skip

# the searched-for paths reported when a global or listener setting is absent
DEFAULTS_ROWS: list[tuple[str, str | None, str]] = [
    ("overload-fixed-heap", None, f"{OM}.resource_monitors{FH}.typed_config.max_heap_size_bytes"),
    ("overload-shrink-heap", None,
     f'{OM}.actions[?name = "envoy.overload_actions.shrink_heap"].triggers{FH}.threshold.value'),
    ("overload-stop-accepting-requests", None,
     f'{OM}.actions[?name = "envoy.overload_actions.stop_accepting_requests"].triggers{FH}'
     ".threshold.value"),
    ("overload-disable-http-keepalive", None,
     f'{OM}.actions[?name = "envoy.overload_actions.disable_http_keepalive"].triggers{FH}'
     ".threshold.value"),
    ("overload-reduce-timeouts", None,
     f'{OM}.actions[?name = "envoy.overload_actions.reduce_timeouts"].typed_config'
     '.timer_scale_factors[?timer = "HTTP_DOWNSTREAM_CONNECTION_IDLE"]'),
    ("overload-tcp-listener-accept", None,
     f'{OM}.loadshed_points[?name = "envoy.load_shed_points.tcp_listener_accept"].triggers'),
    ("global-downstream-max-connections", None,
     f'{OM}.resource_monitors[?name = "envoy.resource_monitors.global_downstream_max_connections"]'
     f'.typed_config.max_active_downstream_connections | '
     f'{RT}[*].static_layer["overload.global_downstream_max_connections"]'),
    ("listener-connection-limit", "0.0.0.0_8080",
     f'{RT}[*].static_layer["envoy.resource_limits.listener.0.0.0.0_8080.connection_limit"]'),
    ("listener-connection-limit", "0.0.0.0_8443",
     f'{RT}[*].static_layer["envoy.resource_limits.listener.0.0.0.0_8443.connection_limit"]'),
    ("listener-buffer-limit", "0.0.0.0_8080", f"{L8080}.per_connection_buffer_limit_bytes"),
    ("listener-buffer-limit", "0.0.0.0_8443", f"{L8443}.per_connection_buffer_limit_bytes"),
]  # fmt: skip


def _audit(path: Any) -> dict[str, Any]:
    config = edge_config(load(path), origin=str(path))
    listeners = select_listeners(config, "", origin=str(path))
    return audit_report(
        evaluate(config, listeners, default_rules()), source="t", listeners=listeners
    )


def _hcm_expectations(found_too: bool) -> list[tuple[str, str, Any, str]]:
    rows = []
    for rule, (field, *values) in HCM_ROWS.items():
        for (chain, path), value in zip(HCMS.items(), values, strict=True):
            rows.append((rule, LISTENER_OF[chain], value if found_too else "absent",
                         f"{path}.{field}"))  # fmt: skip
    return rows


def test_default_rules_cover_every_item_of_the_issue() -> None:
    ids = [rule.id for rule in default_rules()]
    assert ids == [row[0] for row in COMPLIANT_ROWS if row[1] in (None, "0.0.0.0_8080")] + list(
        HCM_ROWS
    )
    assert len(ids) == 22


def test_compliant_dump_passes_every_rule_with_the_value_and_path_found() -> None:
    report = _audit(COMPLIANT)
    assert report["passed"] is True
    assert report["listeners"] == ["0.0.0.0_8080", "0.0.0.0_8443"]
    assert report["summary"] == {
        "rules": 22, "checks": 11 + 13 * 3, "passed": 50, "failed": 0, "failed_rules": [],
    }  # fmt: skip
    got = [(r["rule"], r["listener"], r["found"], r["path"]) for r in report["results"]]
    expected = [*COMPLIANT_ROWS, *_hcm_expectations(found_too=True)]
    assert got == expected
    assert all(r["pass"] for r in report["results"])


def test_defaults_dump_fails_every_rule_as_absent_with_the_searched_path() -> None:
    report = _audit(DEFAULTS)
    assert report["passed"] is False
    assert report["summary"]["failed"] == 50 and report["summary"]["passed"] == 0
    assert len(report["summary"]["failed_rules"]) == 22
    got = [(r["rule"], r["listener"], r["found"], r["path"]) for r in report["results"]]
    expected = [(rule, listener, "absent", path) for rule, listener, path in DEFAULTS_ROWS]
    assert got == expected + _hcm_expectations(found_too=False)
    assert not any(r["pass"] for r in report["results"])


@pytest.mark.parametrize(
    ("rule", "expected", "envoy_default"),
    [
        ("listener-buffer-limit", "<= 32768", "1048576 (1 MiB)"),
        ("http2-max-concurrent-streams", "<= 100", "2147483647"),
        ("headers-with-underscores", "REJECT_REQUEST", "ALLOW"),
        ("use-remote-address", "true", "false"),
        ("request-headers-timeout", "> 0s", "disabled"),
        ("global-downstream-max-connections", "< 1000000000",
         "unlimited (Istio writes 2147483647, which only silences the warning)"),
    ],
)  # fmt: skip
def test_report_rows_say_what_was_expected_and_what_envoy_does_by_default(
    rule: str, expected: str, envoy_default: str
) -> None:
    rows = [r for r in _audit(DEFAULTS)["results"] if r["rule"] == rule]
    assert rows and all(
        r["expected"] == expected and r["envoy_default"] == envoy_default for r in rows
    )
