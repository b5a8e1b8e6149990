"""The DNS rate limit beside real rulesets (the nftables project's examples, see fixtures/).

A target rarely has an empty ruleset: a workstation firewall and NAT chains on
the same postrouting hook are loaded first (with Debian's ``nft -f``). The
limit must still hold, the probe must read only our table, and the undo must
leave every other table exactly as it was (compared stateless, ``nft -s``).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.dns_netlab import ResolverPair, flood_from, host_tables, resolver_pair

from chaos_ext.dns import _ratelimit
from chaos_ext.dns.actions import limit_dns_rate, remove_dns_rate_limit
from chaos_ext.dns.probes import dns_rate_limit_drops

EXAMPLES = Path(__file__).parent / "fixtures" / "nftables-examples"
LOADED = ["workstation.nft", "inet-nat.nft", "ipv4-nat.nft"]

pytestmark = pytest.mark.timeout(180)


def _in(ns: str, *argv: str) -> str:
    return subprocess.run(
        ["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, timeout=30, check=True
    ).stdout


def _stateless_ruleset(ns: str) -> list[dict[str, object]]:
    items = json.loads(_in(ns, "nft", "-s", "-j", "list", "ruleset"))["nftables"]
    return [item for item in items if "metainfo" not in item]


@pytest.fixture
def pair_with_rulesets(ledger_path: Path) -> Iterator[ResolverPair]:
    before = host_tables()
    with resolver_pair() as pair:
        for name in LOADED:
            _in(pair.client_ns, "nft", "-f", str(EXAMPLES / name))
        yield pair
    assert host_tables() == before


def test_real_rulesets_are_loaded_as_published(pair_with_rulesets: ResolverPair) -> None:
    items = _stateless_ruleset(pair_with_rulesets.client_ns)
    tables = {(t["table"]["family"], t["table"]["name"]) for t in items if "table" in t}
    assert tables == {("inet", "filter"), ("inet", "nat"), ("ip", "nat")}


def test_limit_beside_a_firewall_and_nat_reads_and_deletes_only_its_table(
    pair_with_rulesets: ResolverPair,
) -> None:
    pair = pair_with_rulesets
    before = _stateless_ruleset(pair.client_ns)
    applied = limit_dns_rate(pps=50, target=pair.target)
    # the workstation firewall drops unsolicited input: answers still come back (established)
    limited = flood_from(pair, qps=400, duration_seconds=4)
    assert limited["answer"] <= 50 + 4 * 50 + 5, limited
    assert limited["answer"] >= 4 * 50 * 0.9, limited

    drops = dns_rate_limit_drops(target=pair.target)
    assert [t["table"] for t in drops["tables"]] == [applied["table"].split()[1]]
    assert drops["dropped"] == limited["error"] and drops["passed"] == limited["answer"]

    remove_dns_rate_limit(target=pair.target)
    assert _stateless_ruleset(pair.client_ns) == before
    for item in before:
        if "table" in item:
            assert not _ratelimit.is_our_table(item["table"]["name"])
