"""Reading inputs: kinds, clear errors, listener states and choice, HCM forms."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml
from support.envoy_dumps import COMPLIANT, load

from chaos_ext.envoy._dump import EdgeConfig, edge_config, select_listeners
from chaos_ext.envoy._hcm import hcm_section
from chaos_ext.envoy._input import decode, snake_keys
from chaos_ext.envoy.errors import EnvoyError


def _config(data: dict[str, Any] | str) -> EdgeConfig:
    raw = data if isinstance(data, str) else json.dumps(data)
    return edge_config(decode(raw, origin="x"), origin="x")


def test_malformed_json_names_the_origin_and_the_position() -> None:
    raw = COMPLIANT.read_bytes()[:5000]  # a dump cut short (e.g. a dropped connection)
    with pytest.raises(EnvoyError, match=r"^dump\.json: not valid JSON \(line \d+, column \d+: "):
        decode(raw, origin="dump.json")


def test_not_utf8() -> None:
    with pytest.raises(EnvoyError, match=r"^x: not UTF-8 \(invalid continuation byte\)"):
        decode(b'{"configs": "\xe9"}', origin="x")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"stats": []}', "found keys stats"),
        ("[1, 2]", "found list"),
        ('{"configs": {}}', "'configs' is not a list"),
        ("just: [unclosed", r"neither JSON nor valid YAML \(line 2, column 1\): did not find"),
        ("{}", "found an empty mapping"),
    ],
)
def test_what_is_neither_a_dump_nor_a_bootstrap_is_refused(body: str, message: str) -> None:
    with pytest.raises(EnvoyError, match=message):
        decode(body, origin="x")


def test_kinds_are_detected_from_the_content() -> None:
    assert decode(COMPLIANT.read_bytes(), origin="x").kind == "config_dump"
    boot = load(COMPLIANT)["configs"][0]["bootstrap"]
    as_yaml = decode(yaml.safe_dump(boot), origin="x")
    assert (as_yaml.kind, as_yaml.syntax) == ("bootstrap", "YAML")
    entry = decode(json.dumps(load(COMPLIANT)["configs"][0]), origin="x")  # ?resource=bootstrap
    assert entry.kind == "bootstrap" and entry.data == boot and entry.notes


def test_dump_without_bootstrap_says_to_fetch_the_whole_dump() -> None:
    dump = load(COMPLIANT)
    dump["configs"] = dump["configs"][1:]  # what ?resource=dynamic_listeners would give
    with pytest.raises(EnvoyError, match="no BootstrapConfigDump; fetch the whole /config_dump"):
        _config(dump)


def test_missing_listener_lists_the_ones_there_are() -> None:
    with pytest.raises(EnvoyError) as caught:
        select_listeners(_config(load(COMPLIANT)), "0.0.0.0_9443", origin="gw")
    assert str(caught.value) == (
        "gw: no listener named '0.0.0.0_9443'; listeners: "
        "0.0.0.0_15021, 0.0.0.0_15090, 0.0.0.0_8080, 0.0.0.0_8443"
    )


def test_default_choice_is_dynamic_http_listeners_then_static_ones() -> None:
    dump = load(COMPLIANT)
    assert [item.name for item in select_listeners(_config(dump), "", origin="x")] == [
        "0.0.0.0_8080",
        "0.0.0.0_8443",
    ]
    static_only = copy.deepcopy(dump)
    static_only["configs"][2]["dynamic_listeners"] = []
    assert [item.name for item in select_listeners(_config(static_only), "", origin="x")] == [
        "0.0.0.0_15090",
        "0.0.0.0_15021",
    ]
    nothing = copy.deepcopy(static_only)
    nothing["configs"][2]["static_listeners"] = []
    with pytest.raises(EnvoyError, match="no listener with an HTTP connection manager"):
        select_listeners(_config(nothing), "", origin="x")


def test_listener_states_warming_is_audited_draining_is_not() -> None:
    dump = load(COMPLIANT)
    entries = dump["configs"][2]["dynamic_listeners"]
    entries[0]["draining_state"] = entries[0].pop("active_state")
    entries[1]["warming_state"] = entries[1].pop("active_state")
    config = _config(dump)
    assert [(item.name, item.state) for item in config.listeners if item.dynamic] == [
        ("0.0.0.0_8080", "draining"),
        ("0.0.0.0_8443", "warming"),
    ]
    chosen = select_listeners(config, "", origin="x")
    assert [item.label for item in chosen] == ["0.0.0.0_8443"]
    assert chosen[0].section.path == "configs[2].dynamic_listeners[1].warming_state.listener"


def test_unnamed_listener_gets_a_label_from_its_address() -> None:
    dump = load(COMPLIANT)
    entry = dump["configs"][2]["dynamic_listeners"][1]
    del entry["name"], entry["active_state"]["listener"]["name"]
    config = _config(dump)
    (unnamed,) = [item for item in config.listeners if item.name is None]
    assert unnamed.label == "(unnamed 0.0.0.0:8443)"
    assert select_listeners(config, "(unnamed 0.0.0.0:8443)", origin="x") == (unnamed,)


def test_v2alpha_listener_dump_shape() -> None:
    dump = load(COMPLIANT)
    entry = dump["configs"][2]
    entry["@type"] = "type.googleapis.com/envoy.admin.v2alpha.ListenersConfigDump"
    entry["dynamic_active_listeners"] = [
        item["active_state"] for item in entry.pop("dynamic_listeners")
    ]
    dump["configs"][0]["@type"] = "type.googleapis.com/envoy.admin.v2alpha.BootstrapConfigDump"
    chosen = select_listeners(_config(dump), "", origin="x")
    assert [(item.name, item.state, item.section.path) for item in chosen] == [
        ("0.0.0.0_8080", "active", "configs[2].dynamic_active_listeners[0].listener"),
        ("0.0.0.0_8443", "active", "configs[2].dynamic_active_listeners[1].listener"),
    ]


def test_hcm_in_default_filter_chain_is_found() -> None:
    dump = load(COMPLIANT)
    listener = dump["configs"][2]["dynamic_listeners"][0]["active_state"]["listener"]
    listener["default_filter_chain"] = listener.pop("filter_chains")[0]
    (chosen, _) = select_listeners(_config(dump), "", origin="x")
    assert [hcm.path for hcm in chosen.hcms] == [
        "configs[2].dynamic_listeners[0].active_state.listener.default_filter_chain"
        ".filters[0].typed_config"
    ]


@pytest.mark.parametrize(
    ("net_filter", "path", "problem"),
    [
        (
            {"name": "envoy.http_connection_manager", "config": {"stream_idle_timeout": "0s"}},
            "f.config",
            "",
        ),
        (
            {
                "name": "x",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.config.filter.network"
                    ".http_connection_manager.v2.HttpConnectionManager",
                    "stat_prefix": "a",
                },
            },
            "f.typed_config",
            "",
        ),
        (
            {
                "name": "x",
                "typed_config": {
                    "@type": "type.googleapis.com/udpa.type.v1.TypedStruct",
                    "type_url": "type.googleapis.com/envoy.extensions.filters"
                    ".network.http_connection_manager.v3.HttpConnectionManager",
                    "value": {"normalize_path": True},
                },
            },
            "f.typed_config.value",
            "",
        ),
        (
            {
                "name": "envoy.filters.network.http_connection_manager",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.network"
                    ".http_connection_manager.v3.HttpConnectionManager",
                    "value": "CgRodHRw",
                },
            },
            "f.typed_config",
            "packed protobuf bytes",
        ),
        (
            {
                "name": "envoy.http_connection_manager",
                "config": {"deprecated_v1": True, "value": {}},
            },
            "f.config",
            "deprecated_v1",
        ),
        (
            {
                "name": "envoy.filters.network.http_connection_manager",
                "config_discovery": {"type_urls": ["x"]},
            },
            "f.config_discovery",
            "ECDS",
        ),
        ({"name": "envoy.filters.network.http_connection_manager"}, "f", "without typed_config"),
        (
            {
                "name": "envoy.filters.network.http_connection_manager",
                "typed_config": {"@type": "type.googleapis.com/x.TcpProxy"},
            },
            "f.typed_config",
            "is not an HttpConnectionManager",
        ),
    ],
)
def test_hcm_forms(net_filter: dict[str, Any], path: str, problem: str) -> None:
    section = hcm_section(net_filter, "f")
    assert section is not None and section.path == path
    assert (problem in section.problem) if problem else not section.problem


def test_other_filters_are_not_hcms() -> None:
    assert hcm_section({"name": "envoy.tcp_proxy", "config": {"cluster": "a"}}, "f") is None
    assert hcm_section({"name": "x", "typed_config": {"@type": "a.TcpProxy"}}, "f") is None


def test_camel_case_keys_become_field_names_but_map_keys_stay() -> None:
    data = {
        "dynamicListeners": [
            {
                "activeState": {
                    "listener": {
                        "filterChains": [
                            {
                                "filters": [
                                    {
                                        "name": "envoy.http_connection_manager",
                                        "config": {"stream_idle_timeout": "0s", "keepMe": 1},
                                    }
                                ]
                            }
                        ],
                        "metadata": {"filterMetadata": {"someKey": 1}},
                    }
                }
            }
        ],
        "staticLayer": {"myRuntimeKey": 1},
    }
    out = snake_keys(data)
    listener = out["dynamic_listeners"][0]["active_state"]["listener"]
    assert listener["filter_chains"][0]["filters"][0]["config"] == {
        "stream_idle_timeout": "0s",
        "keepMe": 1,
    }
    assert listener["metadata"] == {"filterMetadata": {"someKey": 1}}
    assert out["static_layer"] == {"myRuntimeKey": 1}


@pytest.mark.parametrize(
    "path",
    [COMPLIANT, *sorted((COMPLIANT.parent / "upstream").glob("*config_dump.json"))],
    ids=lambda p: p.name,
)
def test_lean_reading_gives_the_same_audit_as_a_full_parse(path: Any) -> None:
    """msgspec skips what no rule reads; every verdict, value and path stays the same."""
    from chaos_ext.envoy._pipeline import audit_decoded, cluster_keys  # noqa: PLC0415
    from chaos_ext.envoy._profiles import effective_rules  # noqa: PLC0415

    for profile in ("hardened", "sidecar"):
        chosen, rules = effective_rules(profile, None, "")
        raw = path.read_bytes()
        lean = decode(raw, origin="x", cluster_keys=cluster_keys(rules))
        full = decode(raw, origin="x", lean=False)
        read = (".BootstrapConfigDump", ".ListenersConfigDump", ".ClustersConfigDump")
        others = [
            e for e in full.data["configs"] if not e["@type"].endswith((*read, ".RoutesConfigDump"))
        ]
        assert bool(others) == bool(lean.notes)
        if others:
            assert lean.notes[0].startswith("not parsed, no rule reads them:")
        reports = []
        for decoded in (lean, full):
            try:
                reports.append(
                    audit_decoded(
                        decoded,
                        origin="x",
                        profile=chosen,
                        rules=rules,
                        role="gateway" if profile == "hardened" else "sidecar",
                    ).report["results"]
                )
            except EnvoyError as exc:
                reports.append(str(exc))
        assert reports[0] == reports[1]


def test_lean_reading_falls_back_to_the_standard_parser() -> None:
    listeners = b'"@type": "type.googleapis.com/envoy.admin.v3.ListenersConfigDump"'
    big = b'{"configs": [{' + listeners + b', "n": 123456789012345678901234567890}]}'
    assert decode(big, origin="x").data["configs"][0]["n"] == 123456789012345678901234567890
    huge = b'{"configs": [{' + listeners + b', "n": 1e400}]}'  # msgspec declines, json reads it
    assert decode(huge, origin="x").data["configs"][0]["n"] == float("inf")
    with pytest.raises(EnvoyError, match=r"not valid JSON \(line 1, column 14"):
        decode(b'{"configs": [', origin="x")
