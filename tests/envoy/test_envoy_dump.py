"""Parsing the dump: clear errors for what is not a usable /config_dump; listener choice."""

from __future__ import annotations

import copy
import json

import pytest
from support.envoy_dumps import COMPLIANT, load

from chaos_ext.envoy._dump import edge_config, parse_config_dump, select_listeners
from chaos_ext.errors import EnvoyError


def test_malformed_json_names_the_origin_and_the_position() -> None:
    raw = COMPLIANT.read_bytes()[:5000]  # a dump cut short (e.g. a dropped connection)
    with pytest.raises(EnvoyError, match=r"^dump\.json: not valid JSON \(line \d+, column \d+: "):
        parse_config_dump(raw, origin="dump.json")


def test_not_utf8() -> None:
    with pytest.raises(EnvoyError, match=r"^x: not UTF-8 text \(invalid continuation byte\)"):
        parse_config_dump(b'{"configs": "\xe9"}', origin="x")


@pytest.mark.parametrize("body", ['{"stats": []}', "[1, 2]", '{"configs": {}}'])
def test_json_that_is_not_a_config_dump(body: str) -> None:
    with pytest.raises(EnvoyError, match="without a 'configs' list: not an Envoy v3 /config_dump"):
        parse_config_dump(body, origin="x")


def test_dump_without_bootstrap_says_to_fetch_the_whole_dump() -> None:
    dump = load(COMPLIANT)
    dump["configs"] = dump["configs"][1:]  # what ?resource=dynamic_listeners would give
    with pytest.raises(EnvoyError, match="no BootstrapConfigDump; fetch the whole /config_dump"):
        edge_config(dump, origin="x")


def test_missing_listener_lists_the_ones_there_are() -> None:
    config = edge_config(load(COMPLIANT), origin="gw")
    with pytest.raises(EnvoyError) as caught:
        select_listeners(config, "0.0.0.0_9443", origin="gw")
    assert str(caught.value) == (
        "gw: no active listener named '0.0.0.0_9443'; listeners in the dump: "
        "0.0.0.0_15021, 0.0.0.0_15090, 0.0.0.0_8080, 0.0.0.0_8443"
    )


def test_default_choice_is_dynamic_http_listeners_then_static_ones() -> None:
    dump = load(COMPLIANT)
    config = edge_config(dump, origin="x")
    assert [item.name for item in select_listeners(config, "", origin="x")] == [
        "0.0.0.0_8080",
        "0.0.0.0_8443",
    ]
    static_only = copy.deepcopy(dump)
    static_only["configs"][2]["dynamic_listeners"] = []
    config = edge_config(static_only, origin="x")
    assert [item.name for item in select_listeners(config, "", origin="x")] == [
        "0.0.0.0_15090",
        "0.0.0.0_15021",
    ]
    nothing = copy.deepcopy(static_only)
    nothing["configs"][2]["static_listeners"] = []
    with pytest.raises(EnvoyError, match="no listener with an HTTP connection manager"):
        select_listeners(edge_config(nothing, origin="x"), "", origin="x")


def test_warming_only_listener_is_not_audited() -> None:
    dump = load(COMPLIANT)
    entry = dump["configs"][2]["dynamic_listeners"][1]
    entry["warming_state"] = entry.pop("active_state")
    config = edge_config(dump, origin="x")
    assert [item.name for item in config.listeners if item.dynamic] == ["0.0.0.0_8080"]


def test_hcm_in_default_filter_chain_is_found() -> None:
    dump = load(COMPLIANT)
    listener = dump["configs"][2]["dynamic_listeners"][0]["active_state"]["listener"]
    listener["default_filter_chain"] = listener.pop("filter_chains")[0]
    (chosen, _) = select_listeners(edge_config(dump, origin="x"), "", origin="x")
    assert [hcm.path for hcm in chosen.hcms] == [
        "configs[2].dynamic_listeners[0].active_state.listener.default_filter_chain"
        ".filters[0].typed_config"
    ]


def test_fixtures_are_typed_like_envoy_output() -> None:
    for path in (COMPLIANT,):
        dump = json.loads(path.read_text())
        types = [entry["@type"].rsplit(".", 1)[-1] for entry in dump["configs"]]
        assert types == [
            "BootstrapConfigDump", "ClustersConfigDump", "ListenersConfigDump",
            "ScopedRoutesConfigDump", "RoutesConfigDump", "SecretsConfigDump",
        ]  # fmt: skip
