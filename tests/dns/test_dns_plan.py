"""The DNS plans: the rate limit's namespace and table (ruleset untouched), dnsmasq's target."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.dns_netlab import host_tables, netns_tables
from support.netlab import sh

from chaos_ext._products.sandbox.servers import dnsmasq
from chaos_ext.dns.actions import limit_dns_rate, remove_dns_rate_limit
from chaos_ext.dns.plan import plan_flood_dns, plan_limit_dns_rate, plan_saturate_dnsmasq_tcp

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def client_ns() -> Iterator[str]:
    """A namespace with a table of someone else's, which must stay exactly as it is."""
    ns = f"gdp-{uuid.uuid4().hex[:8]}"
    host_before = host_tables()
    sh("ip", "netns", "add", ns)
    try:
        sh("ip", "netns", "exec", ns, "nft", "add", "table", "inet", "theirs")
        sh(
            "ip",
            "netns",
            "exec",
            ns,
            "nft",
            "add",
            "chain",
            "inet",
            "theirs",
            "out",
            "{ type filter hook output priority 0 ; }",
        )
        yield ns
    finally:
        sh("ip", "netns", "delete", ns, check=False)
    assert host_tables() == host_before, "the host's own ruleset changed"


def _ruleset(ns: str) -> str:
    return sh("ip", "netns", "exec", ns, "nft", "list", "ruleset").stdout


def test_rate_limit_plan_names_netns_and_table_and_leaves_the_ruleset(
    client_ns: str, ledger_path: Path
) -> None:
    before = _ruleset(client_ns)
    plan = plan_limit_dns_rate(pps=100, resolvers=["10.0.0.2"], target=f"netns:{client_ns}")
    assert _ruleset(client_ns) == before  # byte-identical
    assert not ledger_path.exists()
    radius = plan["blast_radius"]
    assert radius["netns"] == f"/run/netns/{client_ns}"
    assert radius["resolvers"] == ["10.0.0.2"] and radius["pps"] == 100
    assert radius["table"].startswith("inet gameday_dnsrate_")
    assert all(c["ok"] for c in plan["preflight"]), plan["preflight"]

    # the run then creates a table of exactly that family and prefix, and nothing else
    applied = limit_dns_rate(pps=100, resolvers=["10.0.0.2"], target=f"netns:{client_ns}")
    try:
        assert netns_tables(client_ns) == sorted(["inet theirs", applied["table"]])
        assert applied["table"].startswith(radius["table"].split("<")[0])
        again = plan_limit_dns_rate(pps=100, target=f"netns:{client_ns}")
        (present,) = [c for c in again["preflight"] if c["check"] == "no rate limit there yet"]
        assert not present["ok"] and applied["table"].split()[1] in present["detail"]
    finally:
        remove_dns_rate_limit()
    assert _ruleset(client_ns) == before


def test_saturation_plan_checks_tcp_and_holds_nothing(
    dns_server: dnsmasq.Dnsmasq, ledger_path: Path
) -> None:
    plan = plan_saturate_dnsmasq_tcp(dns_server.address, port=dns_server.port, connections=20)
    assert plan["targets"] == [f"{dns_server.address}:{dns_server.port}"]
    assert plan["blast_radius"]["connections"] == 20 and "saturates" in plan["would"]
    assert all(c["ok"] for c in plan["preflight"])
    assert not ledger_path.exists()
    flood = plan_flood_dns(
        dns_server.address,
        ["web"],
        port=dns_server.port,
        qps=50,
        duration_seconds=2,
        search_domains=["a.test", "b.test"],
        ndots=5,
    )
    assert flood["blast_radius"]["max_queries"] == 100
    assert flood["blast_radius"]["queries_per_lookup"] == {"web": 3}
