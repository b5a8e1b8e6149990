"""The pure core of the DNS rate limit: arguments, the table batch, counters, preflight naming."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

import pytest

from chaos_ext.dns import _nft, _ratelimit
from chaos_ext.errors import InvalidArgument

#: upstream nftables tests/py/any/limit.t.json (v1.0.x, GPL-2.0), the JSON nft itself
#: writes for "limit rate over 1023/second burst 10 packets"
UPSTREAM_LIMIT_OVER = {"burst": 10, "inv": True, "per": "second", "rate": 1023}

#: what nft 1.0.6 answered to ``list table`` for a loaded limit (captured in a test namespace)
LISTED = {
    "nftables": [
        {
            "metainfo": {
                "version": "1.0.6",
                "release_name": "Lester Gooch #5",
                "json_schema_version": 1,
            }
        },
        {"table": {"family": "inet", "name": "gameday_dnsrate_1d03103f8922", "handle": 1}},
        {
            "limit": {
                "family": "inet",
                "name": "dns_pps",
                "table": "gameday_dnsrate_1d03103f8922",
                "handle": 1,
                "rate": 100,
                "per": "second",
                "inv": True,
                "burst": 100,
            }
        },
        {
            "counter": {
                "family": "inet",
                "name": "dns_packets",
                "table": "gameday_dnsrate_1d03103f8922",
                "handle": 2,
                "packets": 5000,
                "bytes": 235000,
            }
        },
        {
            "counter": {
                "family": "inet",
                "name": "dns_dropped",
                "table": "gameday_dnsrate_1d03103f8922",
                "handle": 3,
                "packets": 4401,
                "bytes": 206847,
            }
        },
    ]
}


def test_defaults_are_the_vpc_resolvers_limit_with_one_second_of_burst() -> None:
    spec = _ratelimit.check_limit_arguments({})
    assert (spec.pps, spec.burst, spec.port, spec.resolvers) == (1024, 1024, 53, ())
    assert _ratelimit.check_limit_arguments({"pps": 50, "burst": 5}).burst == 5


def test_the_limit_object_is_what_nft_itself_writes_for_rate_over() -> None:
    spec = _ratelimit.check_limit_arguments({"pps": 1023, "burst": 10})
    batch = _ratelimit.ruleset(spec, "gameday_dnsrate_0123456789ab")["nftables"]
    (limit,) = [item["add"]["limit"] for item in batch if "limit" in item["add"]]
    assert {k: v for k, v in limit.items() if k not in ("family", "table", "name")} == (
        UPSTREAM_LIMIT_OVER
    )


def _rules(spec: _ratelimit.RateLimitSpec) -> list[list[dict[str, Any]]]:
    batch = _ratelimit.ruleset(spec, "gameday_dnsrate_0123456789ab")["nftables"]
    return [item["add"]["rule"]["expr"] for item in batch if "rule" in item["add"]]


def test_every_rule_shares_one_bucket_and_leaves_loopback_alone() -> None:
    spec = _ratelimit.check_limit_arguments(
        {"pps": 100, "resolvers": ["10.0.0.2", "fd00::2", "10.0.0.2", "169.254.169.253"]}
    )
    assert spec.resolvers == tuple(
        ipaddress.ip_address(a) for a in ("10.0.0.2", "fd00::2", "169.254.169.253")
    )
    rules = _rules(spec)
    assert len(rules) == 2  # one per address family
    for expr in rules:
        assert {"limit": "dns_pps"} in expr and expr[-1] == {"drop": None}
        assert expr[0]["match"] == {"op": "!=", "left": {"meta": {"key": "oifname"}}, "right": "lo"}
    v4, v6 = (expr[3]["match"] for expr in rules)
    assert v4["left"]["payload"]["protocol"] == "ip"
    assert v4["right"] == {"set": ["10.0.0.2", "169.254.169.253"]}
    assert (v6["left"]["payload"]["protocol"], v6["right"]) == ("ip6", {"set": ["fd00::2"]})
    assert len(_rules(_ratelimit.check_limit_arguments({"pps": 100}))) == 1


@pytest.mark.parametrize(
    "bad",
    [
        {"pps": 0},
        {"pps": 10**8},
        {"pps": 1.5},
        {"pps": True},
        {"burst": -1},
        {"port": 70000},
        {"resolvers": ["dns.google"]},
        {"resolvers": "10.0.0.2"},
        {"resolvers": ["10.0.0.1"] * 33},
        {"duration_seconds": 10**6},
    ],
)
def test_bad_arguments_are_named(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument, match=next(iter(bad))):
        _ratelimit.check_limit_arguments(bad)


def test_counters_come_from_our_table_only() -> None:
    found = _ratelimit.counters_of(LISTED, "gameday_dnsrate_1d03103f8922")
    assert found == {
        "table": "gameday_dnsrate_1d03103f8922",
        "pps": 100,
        "burst": 100,
        "packets": 5000,
        "dropped": 4401,
        "passed": 599,
    }
    with pytest.raises(ValueError, match="lacks"):
        _ratelimit.counters_of(LISTED, "gameday_dnsrate_ffffffffffff")


def test_only_our_table_names_are_ours() -> None:
    listing = {
        "nftables": [
            {"table": {"family": "inet", "name": "filter"}},
            {"table": {"family": "ip", "name": "gameday_dnsrate_0123456789ab"}},  # not inet
            {"table": {"family": "inet", "name": "gameday_dnsrate_0123456789ab"}},
            {"table": {"family": "inet", "name": "gameday_dnsrate_x; flush ruleset"}},
        ]
    }
    assert _ratelimit.our_tables(listing) == ["gameday_dnsrate_0123456789ab"]
    with pytest.raises(InvalidArgument):
        _ratelimit.table_name("not-hex")


def test_preflight_names_the_first_object_the_kernel_refuses() -> None:
    """As on a kernel built without CONFIG_NFT_LIMIT (nft's own message for it)."""
    seen: list[list[str]] = []

    def kernel_without_limit(batch: Mapping[str, Any]) -> object:
        kinds = [next(iter(item[verb])) for item in batch["nftables"] for verb in item]
        seen.append(kinds)
        if "limit" in kinds:
            raise _nft.NftError("Error: Could not process rule: No such file or directory")
        return {}

    missing = _nft._first_missing(kernel_without_limit)
    assert missing is not None
    assert missing.startswith("the nftables limit expression (CONFIG_NFT_LIMIT): Error:")
    assert seen == [["table"], ["table"], ["table", "limit"]]  # add, delete, add (refused)
