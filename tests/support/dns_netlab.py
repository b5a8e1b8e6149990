"""A client and a resolver in two network namespaces the test creates, joined by a veth pair.

::

    with resolver_pair() as pair:          # pair.client_ns, pair.server (a real dnsmasq on :53)
        flood_from(pair, qps=1000, duration_seconds=5)  # flood_dns inside the client namespace

DNS packets from the client leave through ``c0`` towards 10.77.0.2:53, the
way a node's packets leave its network interface towards the VPC resolver.
Everything (namespaces, dnsmasq) is removed afterwards. The host's own
ruleset is never touched: :func:`host_tables` lets a test prove it.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaos_ext._core.targets.netns import run_in_netns
from chaos_ext._products.sandbox.servers import dnsmasq
from chaos_ext.dns.actions import flood_dns
from support.dns_checks import RECORDS, ZONES

__all__ = ["ResolverPair", "flood_from", "host_tables", "netns_tables", "resolver_pair"]

CLIENT_IP, SERVER_IP = "10.77.0.1", "10.77.0.2"


@dataclass(frozen=True)
class ResolverPair:
    client_ns: str
    server_ns: str
    server: dnsmasq.Dnsmasq

    @property
    def target(self) -> str:
        return f"netns:{self.client_ns}"


def _sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=check)


@contextlib.contextmanager
def resolver_pair(
    *,
    log_queries: bool = False,
    records: Mapping[str, str] | None = None,
    zones: Sequence[str] | None = None,
) -> Iterator[ResolverPair]:
    token = uuid.uuid4().hex[:8]
    client, server = f"gdt-{token}c", f"gdt-{token}s"
    _sh("ip", "netns", "add", client)
    try:
        _sh("ip", "netns", "add", server)
        try:
            _sh(
                "ip",
                "-n",
                client,
                "link",
                "add",
                "c0",
                "type",
                "veth",
                "peer",
                "name",
                "s0",
                "netns",
                server,
            )
            for ns, dev, ip in ((client, "c0", CLIENT_IP), (server, "s0", SERVER_IP)):
                _sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
                _sh("ip", "-n", ns, "link", "set", dev, "up")
                _sh("ip", "-n", ns, "link", "set", "lo", "up")
            with dnsmasq.start(
                records=RECORDS if records is None else records,
                local_domains=ZONES if zones is None else zones,
                address=SERVER_IP,
                port=53,
                prefix=["ip", "netns", "exec", server],
                log_queries=log_queries,
            ) as resolver:
                yield ResolverPair(client, server, resolver)
        finally:
            _sh("ip", "netns", "delete", server, check=False)
    finally:
        _sh("ip", "netns", "delete", client, check=False)


def flood_from(pair: ResolverPair, **arguments: Any) -> dict[str, Any]:
    """flood_dns from inside the client namespace (its sockets live there)."""
    arguments = {
        "names": ["www.example.test."],
        "timeout_seconds": 0.5,
        "concurrency": 2000,
        **arguments,
    }
    return run_in_netns(
        f"/run/netns/{pair.client_ns}",
        lambda: flood_dns(server=SERVER_IP, **arguments),
        timeout=float(arguments.get("duration_seconds", 10)) + 60,
    )


def _tables(prefix: list[str]) -> list[str]:
    out = _sh(*prefix, "nft", "-j", "list", "tables").stdout
    items = json.loads(out or '{"nftables": []}')["nftables"]
    return sorted(f"{i['table']['family']} {i['table']['name']}" for i in items if "table" in i)


def netns_tables(ns: str) -> list[str]:
    """The tables in a namespace's ruleset, read with Debian's nft CLI (independent check)."""
    return _tables(["ip", "netns", "exec", ns])


def host_tables() -> list[str]:
    """The host's own tables (read-only): tests compare them before and after."""
    return _tables([])
