"""The rate limit on an ``ssh:`` target: a real OpenSSH server in the client namespace as the node.

sshd runs inside the client namespace the test made, so the node's ``nft``
(Debian's, run over SSH) acts on that namespace's ruleset only. The SSH
connection itself is opened from inside the namespace (the node's address is
its loopback there).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from support.dns_netlab import ResolverPair, flood_from, host_tables, netns_tables, resolver_pair
from support.servers import sshd

from chaos_ext._core.ledger import Ledger
from chaos_ext._core.rbac import Rule, rbac_of
from chaos_ext._core.targets.netns import run_in_netns
from chaos_ext.dns.actions import limit_dns_rate, remove_dns_rate_limit
from chaos_ext.dns.probes import dns_rate_limit_drops, dns_rate_limit_supported

T = TypeVar("T")
pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(not Path(sshd.SSHD).exists(), reason="openssh-server missing"),
]


@pytest.fixture
def node(ledger_path: Path, tmp_path: Path) -> Iterator[tuple[ResolverPair, sshd.SshdServer]]:
    before = host_tables()
    with (
        resolver_pair() as pair,
        sshd.start(
            workdir=tmp_path / "sshd", netns_prefix=["ip", "netns", "exec", pair.client_ns]
        ) as server,
    ):
        yield pair, server
    assert host_tables() == before


def _inside(pair: ResolverPair, func: Callable[[], T]) -> T:
    return run_in_netns(f"/run/netns/{pair.client_ns}", func, timeout=120)


def _ssh(server: sshd.SshdServer) -> dict[str, Any]:
    return {
        "target": f"ssh:{server.host}:{server.port}",
        "configuration": {"ssh_known_hosts": str(server.known_hosts)},
        "secrets": {"ssh_user": "root", "ssh_key_file": str(server.client_key)},
    }


@pytest.mark.skipif(shutil.which("nft") is None, reason="the node needs Debian's nft")
def test_limit_on_a_node_over_ssh_with_the_nodes_nft(
    node: tuple[ResolverPair, sshd.SshdServer], ledger_path: Path
) -> None:
    pair, server = node
    ssh = _ssh(server)
    found = _inside(pair, lambda: dns_rate_limit_supported(**ssh))
    assert found["via"] == "nft" and netns_tables(pair.client_ns) == []

    applied = _inside(pair, lambda: limit_dns_rate(pps=50, **ssh))
    assert applied["via"] == "nft" and applied["loaded_pps"] == 50
    assert netns_tables(pair.client_ns) == [applied["table"]]
    (entry,) = Ledger(ledger_path).open_entries()
    assert entry.recipe["connection"]["ssh"]["key_file"] == str(server.client_key)
    assert "client_ed25519\n" not in str(entry.recipe)  # the key path only, never the key

    limited = flood_from(pair, qps=300, duration_seconds=3)
    assert limited["answer"] <= 50 + 3 * 50 + 5, limited
    drops = _inside(pair, lambda: dns_rate_limit_drops(**ssh))
    assert drops["dropped"] == limited["error"] and drops["passed"] == limited["answer"]

    removed = _inside(pair, lambda: remove_dns_rate_limit(**ssh))
    assert removed["undone"] == 1
    assert netns_tables(pair.client_ns) == []
    assert Ledger(ledger_path).open_entries() == []


def test_pod_targets_declare_their_rbac() -> None:
    for activity in (limit_dns_rate, remove_dns_rate_limit, dns_rate_limit_drops):
        assert set(rbac_of(activity)) == {
            Rule("", "pods", ("get",)),
            Rule("", "nodes", ("get",), cluster_scoped=True),
        }
