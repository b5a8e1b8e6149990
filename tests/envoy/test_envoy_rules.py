"""Rules as data: overrides by id, new rules, bad rules, and comparison semantics."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from support.envoy_dumps import COMPLIANT, load

from chaos_ext.envoy._audit import evaluate, walk
from chaos_ext.envoy._dump import edge_config, select_listeners
from chaos_ext.envoy._input import decode
from chaos_ext.envoy._profiles import effective_rules as _effective
from chaos_ext.envoy._rules import Rule, compare, compiled_path, rules_from_data
from chaos_ext.errors import InvalidArgument


def default_rules() -> list[Rule]:
    return _effective("envoy-edge", None, "")[1]


def effective_rules(rules: Any, rules_file: str) -> list[Rule]:
    return _effective("envoy-edge", rules, rules_file)[1]


HCM_8443_API = "configs[2].dynamic_listeners[1].active_state.listener.filter_chains[1]"


def _checks(dump: dict[str, Any], rules: list[Any], listener: str = "") -> list[Any]:
    config = edge_config(decode(json.dumps(dump), origin="t"), origin="t")
    return evaluate(config, select_listeners(config, listener, origin="t"), rules)


def _hcm(dump: dict[str, Any], listener: int, chain: int) -> dict[str, Any]:
    entry = dump["configs"][2]["dynamic_listeners"][listener]["active_state"]["listener"]
    typed: dict[str, Any] = entry["filter_chains"][chain]["filters"][0]["typed_config"]
    return typed


@pytest.mark.parametrize(
    ("op", "found", "wanted", "verdict"),
    [
        (">", "300s", "0s", True),
        (">", "0s", "0s", False),  # 0s disables an Envoy timeout: not "set"
        (">", "0.250s", "0s", True),
        ("<=", "2147483648", 1e10, True),  # uint64 as a JSON string
        ("<=", 65536, 65536, True),
        ("<=", 65537, 65536, False),
        ("<", 2147483647, 1000000000, False),
        ("<=", "not-a-number", 1, None),  # unreadable, not a fail
        ("<=", {"seconds": 30, "nanos": 500000000}, 31, True),  # an older dump's Duration
        ("<=", [1], 2, None),
        ("equals", {"a": 1}, "x", None),
        ("loopback", {"socket_address": {"address": "127.0.0.1", "port_value": 15000}}, None, True),
        ("loopback", {"socket_address": {"address": "::1"}}, None, True),
        ("loopback", {"pipe": {"path": "/run/admin.sock"}}, None, True),
        ("loopback", {"socket_address": {"address": "0.0.0.0", "port_value": 9901}}, None, False),
        ("loopback", {"socket_address": {"address": "admin.example"}}, None, False),
        ("loopback", "127.0.0.1", None, None),
        ("equals", True, True, True),
        ("equals", 1, True, False),  # no bool/int confusion
        ("equals", "true", True, False),
        ("equals", "REJECT_REQUEST", "REJECT_REQUEST", True),
        ("equals", "ALLOW", "REJECT_REQUEST", False),
        ("equals", "32768", 32768, True),
        ("one_of", "DROP_HEADER", ["REJECT_REQUEST", "DROP_HEADER"], True),
        ("one_of", "ALLOW", ["REJECT_REQUEST", "DROP_HEADER"], False),
        ("present", {"any": "thing"}, None, True),
    ],
)
def test_compare(op: str, found: Any, wanted: Any, verdict: bool | None) -> None:
    assert compare(op, found, wanted) is verdict


def test_override_by_id_changes_only_that_rule() -> None:
    rules = rules_from_data(
        [{"id": "http2-max-concurrent-streams", "value": 64, "severity": "critical"}],
        default_rules(),
    )
    by_id = {r.id: r for r in rules}
    assert by_id["http2-max-concurrent-streams"].value == 64
    assert by_id["http2-max-concurrent-streams"].severity == "critical"
    assert by_id["http2-max-concurrent-streams"].at == next(
        r.at for r in default_rules() if r.id == "http2-max-concurrent-streams"
    )
    assert len(rules) == len(default_rules())
    checks = [
        c for c in _checks(load(COMPLIANT), rules) if c.rule.id == "http2-max-concurrent-streams"
    ]
    assert [(c.found, c.status) for c in checks] == [(100, "fail"), (100, "fail"), (64, "pass")]


def test_disable_and_add_rules() -> None:
    rules = rules_from_data(
        [
            {"id": "request-timeout", "enabled": False},
            {
                "id": "first-cluster-buffer-limit",
                "title": "upstream buffer limit is 32 KiB",
                "at": "bootstrap:static_resources.clusters[0].per_connection_buffer_limit_bytes",
                "op": "<=",
                "value": 32768,
                "severity": "low",
            },
        ],
        default_rules(),
    )
    ids = [r.id for r in rules]
    assert "request-timeout" not in ids and ids[-1] == "first-cluster-buffer-limit"
    (check,) = [
        c for c in _checks(load(COMPLIANT), rules) if c.rule.id == "first-cluster-buffer-limit"
    ]
    assert check.passed and check.found == 32768
    assert (
        check.path
        == "configs[0].bootstrap.static_resources.clusters[0].per_connection_buffer_limit_bytes"
    )


def test_rules_file_merges_onto_defaults_or_replaces_them(tmp_path: Path) -> None:
    merged = tmp_path / "merge.yaml"
    merged.write_text("rules:\n  - id: listener-buffer-limit\n    value: 16384\n")
    rules = effective_rules(None, str(merged))
    assert len(rules) == 21
    assert next(r for r in rules if r.id == "listener-buffer-limit").value == 16384
    alone = tmp_path / "alone.yaml"
    alone.write_text(
        "defaults: false\nrules:\n  - id: only-this\n    title: normalize_path\n"
        "    at: hcm:normalize_path\n    op: equals\n    value: true\n"
    )
    assert [r.id for r in effective_rules(None, str(alone))] == ["only-this"]
    # the argument applies after the file
    rules = effective_rules([{"id": "listener-buffer-limit", "value": 8192}], str(merged))
    assert next(r for r in rules if r.id == "listener-buffer-limit").value == 8192


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([{"id": "x", "title": "t", "at": "routes:foo"}], "scope one of bootstrap"),
        (
            [{"id": "use-remote-address", "exempt_routes": ["*"]}],
            "exempt_routes and unless are for route: rules",
        ),
        ([{"id": "route-idle-timeout", "exempt_routes": "http.80"}], "a list of route label"),
        (
            [
                {
                    "id": "route-request-timeout",
                    "unless": {"at": "bootstrap:x", "op": ">", "value": 0},
                }
            ],
            "unless looks only at route: or hcm: plain dotted paths",
        ),
        ([{"id": "route-request-timeout", "on_fail": "ignore"}], "on_fail 'ignore'"),
        ([{"id": "use-remote-address", "when_absent": "maybe"}], "when_absent 'maybe'"),
        ([{"id": "use-remote-address", "unnamed_listener": "skip"}], "unnamed_listener 'skip'"),
        ([{"id": "use-remote-address", "fix": {"route": {}}}], "fix must be a mapping"),
        ([{"id": "x", "title": "t", "at": "hcm:a[?"}], "invalid JSONPath"),
        ([{"id": "x", "at": "hcm:a"}], "a new rule needs 'title' and 'at'"),
        ([{"id": "http2-max-concurrent-streams", "op": "<=", "value": "lots"}], "needs a number"),
        ([{"id": "use-remote-address", "op": "matches"}], "op 'matches' is not one of"),
        ([{"id": "use-remote-address", "severity": "urgent"}], "severity 'urgent'"),
        ([{"id": "use-remote-address", "colour": "red"}], "unknown field(s) colour"),
        ([{"id": "x", "title": "t", "at": ["hcm:a", "bootstrap:b"]}], "share one scope level"),
        ([{"id": "x", "title": "t", "at": "hcm:a.{listener}"}], "only for runtime keys"),
        ([{"title": "no id"}], "each rule needs an 'id'"),
        ({"id": "x"}, "expected a list of rule objects"),
    ],
)
def test_bad_rules_are_refused_with_the_reason(items: Any, message: str) -> None:
    with pytest.raises(
        InvalidArgument,
        match=message.replace("(", r"\(")
        .replace(")", r"\)")
        .replace("[", r"\[")
        .replace("?", r"\?"),
    ):
        rules_from_data(items, default_rules())


def test_bad_rules_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="cannot read"):
        effective_rules(None, str(tmp_path / "missing.yaml"))
    broken = tmp_path / "broken.yaml"
    broken.write_text("rules: [\n")
    with pytest.raises(InvalidArgument, match="not valid YAML"):
        effective_rules(None, str(broken))
    empty = tmp_path / "empty.yaml"
    empty.write_text("defaults: false\nrules: []\n")
    with pytest.raises(InvalidArgument, match="no rule left"):
        effective_rules(None, str(empty))


def test_every_filter_chain_must_comply() -> None:
    dump = copy.deepcopy(load(COMPLIANT))
    _hcm(dump, 1, 1)["common_http_protocol_options"]["headers_with_underscores_action"] = "ALLOW"
    checks = [c for c in _checks(dump, default_rules()) if not c.passed]
    assert [(c.rule.id, c.listener, c.found, c.path) for c in checks] == [
        (
            "headers-with-underscores",
            "0.0.0.0_8443",
            "ALLOW",
            f"{HCM_8443_API}.filters[0].typed_config.common_http_protocol_options"
            ".headers_with_underscores_action",
        ),
    ]


def test_zero_timeout_is_a_disabled_timeout() -> None:
    dump = copy.deepcopy(load(COMPLIANT))
    _hcm(dump, 0, 0)["stream_idle_timeout"] = "0s"  # what Istio writes on gateways
    failed = [(c.rule.id, c.found) for c in _checks(dump, default_rules()) if not c.passed]
    assert failed == [("stream-idle-timeout", "0s")]


def test_istio_unlimited_global_connections_fails_and_is_found_in_the_runtime() -> None:
    dump = copy.deepcopy(load(COMPLIANT))
    bootstrap = dump["configs"][0]["bootstrap"]
    bootstrap["overload_manager"]["resource_monitors"].pop(1)
    bootstrap["layered_runtime"]["layers"][0]["static_layer"][
        "overload.global_downstream_max_connections"
    ] = 2147483647
    (check,) = [c for c in _checks(dump, default_rules()) if not c.passed]
    assert check.rule.id == "global-downstream-max-connections"
    assert check.found == 2147483647
    assert check.path == (
        'configs[0].bootstrap.layered_runtime.layers[0].static_layer["overload.global_downstream_max_connections"]'
    )


def test_later_runtime_layers_override_earlier_ones() -> None:
    dump = copy.deepcopy(load(COMPLIANT))
    layers = dump["configs"][0]["bootstrap"]["layered_runtime"]["layers"]
    layers.append(
        {
            "name": "late",
            "static_layer": {"envoy.resource_limits.listener.0.0.0.0_8443.connection_limit": 0},
        }
    )
    checks = [c for c in _checks(dump, default_rules()) if c.rule.id == "listener-connection-limit"]
    assert [(c.listener, c.found, c.passed) for c in checks] == [
        ("0.0.0.0_8080", 2000, True),
        ("0.0.0.0_8443", 0, False),
    ]
    assert checks[1].path == (
        "configs[0].bootstrap.layered_runtime.layers[3].static_layer"
        '["envoy.resource_limits.listener.0.0.0.0_8443.connection_limit"]'
    )


def test_named_static_listener_without_edge_settings() -> None:
    checks = _checks(load(COMPLIANT), default_rules(), listener="0.0.0.0_15021")
    per_listener = [c for c in checks if c.listener == "0.0.0.0_15021"]
    failing = {c.rule.id for c in per_listener if not c.passed}
    assert failing == {c.rule.id for c in per_listener} - {"idle-timeout", "stream-idle-timeout"}
    assert per_listener[0].path == (
        "configs[2].static_listeners[1].listener.per_connection_buffer_limit_bytes"
    )
    limit = next(c for c in per_listener if c.rule.id == "listener-connection-limit")
    assert limit.path.startswith("configs[0].bootstrap.layered_runtime")


def test_plain_paths_are_walked_exactly_as_jsonpath_finds_them() -> None:
    dump = load(COMPLIANT)
    sections = [dump["configs"][0]["bootstrap"], _hcm(dump, 0, 0), _hcm(dump, 1, 1)]
    sections.append(dump["configs"][2]["dynamic_listeners"][1]["active_state"]["listener"])
    plain = [loc.expr for rule in default_rules() for loc in rule.at if loc.scope != "runtime"]
    plain = [expr for expr in plain if "[" not in expr] + ["missing.field", "use_remote_address.x"]
    assert len(plain) > 10
    for section in sections:
        for expr in plain:
            matches = compiled_path(expr).find(section)
            expected = (True, matches[0].value) if matches else (False, None)
            assert walk(section, expr) == expected, expr
