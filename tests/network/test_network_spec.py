"""Pure checks: targets, argument validation, u32 keys, the tc CLI form of the tree."""

from __future__ import annotations

import ipaddress

import pytest

from chaos_ext._core.targets.spec import parse_target
from chaos_ext.errors import InvalidArgument
from chaos_ext.network import _spec


@pytest.mark.parametrize(
    ("text", "kind", "label"),
    [
        ("local", "local", "local/eth0"),
        ("netns:app", "netns", "netns:app/eth0"),
        ("pid:4242", "pid", "pid:4242/eth0"),
        ("ssh:node-1.example.test", "ssh", "ssh:node-1.example.test:22/eth0"),
        ("ssh:10.1.2.3:2222", "ssh", "ssh:10.1.2.3:2222/eth0"),
        ("pod:shop/web-1/app", "pod", "pod:shop/web-1/eth0"),
    ],
)
def test_targets_parse(text: str, kind: str, label: str) -> None:
    target = parse_target(text)
    assert target.kind == kind
    assert target.label("eth0") == label


@pytest.mark.parametrize(
    "text", ["", "netns:", "netns:a b", "pid:0", "pid:-1", "ssh:", "ssh:h;rm -rf", "pod:x", "x"]
)
def test_bad_targets_are_refused(text: str) -> None:
    with pytest.raises(InvalidArgument, match="target"):
        parse_target(text)


GOOD = {"interface": "eth0", "delay_seconds": 0.15, "destinations": ["10.2.0.0/24"]}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"interface": "a-very-long-interface"}, "interface"),
        ({"interface": "eth0; reboot"}, "interface"),
        ({"delay_seconds": 0}, "delay_seconds"),
        ({"delay_seconds": "0.15"}, "delay_seconds"),
        ({"jitter_seconds": 0.2}, "jitter_seconds"),
        ({"correlation": 25}, "correlation: needs jitter"),
        ({"loss": 101}, "loss"),
        ({"destinations": []}, "destinations"),
        ({"destinations": ["10.2.0.0/33"]}, "not a CIDR"),
        ({"ports": [0]}, "ports"),
        ({"ports": [5432] * 3, "destinations": [f"10.{i}.0.0/16" for i in range(30)]}, "exceed"),
        ({"duration_seconds": -1}, "duration_seconds"),
    ],
)
def test_bad_latency_arguments_are_refused(change: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        _spec.check_latency_arguments({**GOOD, **change})


def test_u32_keys_for_ipv4_cidr_and_port() -> None:
    protocol, keys = _spec.u32_keys(ipaddress.ip_network("10.2.0.0/24"), 5432)
    assert protocol == _spec.ETH_P_IP
    assert keys == ["0x0a020000/0xffffff00+16", "0x00001538/0x0000ffff+20"]


def test_u32_keys_for_ipv6_skip_wildcard_words() -> None:
    protocol, keys = _spec.u32_keys(ipaddress.ip_network("fd00:1::/32"), None)
    assert protocol == _spec.ETH_P_IPV6
    assert keys == ["0xfd000001/0xffffffff+24"]


def test_tc_cli_form_of_the_tree() -> None:
    spec = _spec.check_latency_arguments(
        {**GOOD, "jitter_seconds": 0.01, "correlation": 25, "loss": 1.5, "ports": [5432]}
    )
    argvs = _spec.tc_apply_argvs(spec, "eth0")
    assert argvs[0] == [
        "tc",
        "qdisc",
        "replace",
        "dev",
        "eth0",
        "root",
        "handle",
        "1d1a:0",
        "htb",
        "default",
        "1",
    ]
    assert argvs[3] == [
        "tc",
        "qdisc",
        "add",
        "dev",
        "eth0",
        "parent",
        "1d1a:2",
        "handle",
        "1d1b:0",
        "netem",
        "limit",
        "10000",
        "delay",
        "150ms",
        "10ms",
        "25%",
        "loss",
        "1.5%",
    ]
    assert argvs[4] == [
        "tc",
        "filter",
        "add",
        "dev",
        "eth0",
        "parent",
        "1d1a:0",
        "protocol",
        "ip",
        "prio",
        "1",
        "u32",
        "match",
        "u32",
        "0x0a020000",
        "0xffffff00",
        "at",
        "16",
        "match",
        "u32",
        "0x00001538",
        "0x0000ffff",
        "at",
        "20",
        "flowid",
        "1d1a:2",
    ]
