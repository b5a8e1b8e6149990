"""Pure core of the resolver packet-rate limit: arguments, our nftables table, its counters.

:func:`chaos_ext.dns.actions.limit_dns_rate` loads one table (family
``inet``, named ``gameday_dnsrate_<token>``) into the target's ruleset, in
one nftables transaction, through the libnftables JSON API::

    table inet gameday_dnsrate_<token> {
        limit dns_pps { rate over <pps>/second burst <burst> packets }
        counter dns_packets {}        # every DNS packet leaving (the offered rate)
        counter dns_dropped {}        # the packets over the limit (dropped)
        chain dns_egress {
            type filter hook postrouting priority filter; policy accept;
            oifname != "lo" meta l4proto { tcp, udp } th dport 53 [ip daddr { resolvers }]
                counter name "dns_packets" limit name "dns_pps" counter name "dns_dropped" drop
        }
    }

The named limit is one token bucket shared by every rule (IPv4 and IPv6
resolvers, UDP and TCP), as the VPC resolver counts every packet an
interface sends it, whatever the protocol. Postrouting sees the packets the
target sends itself and the ones it routes (a node's pods). Loopback is left
out: a node-local cache answering on 127.0.0.1 or 169.254.20.10 is not the
upstream resolver.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chaos_ext._core.validation import require_range
from chaos_ext.dns import _nft_json
from chaos_ext.errors import InvalidArgument

__all__ = [
    "FAMILY",
    "TABLE_PREFIX",
    "RateLimitSpec",
    "check_limit_arguments",
    "counters_of",
    "delete_document",
    "is_our_table",
    "our_tables",
    "ruleset",
    "table_name",
]

FAMILY = _nft_json.FAMILY
TABLE_PREFIX = "gameday_dnsrate_"
_TABLES = _nft_json.OurTables(TABLE_PREFIX)
LIMIT = "dns_pps"
SEEN = "dns_packets"
DROPPED = "dns_dropped"
CHAIN = "dns_egress"
#: The VPC resolver's limit: 1,024 packets per second per network interface.
VPC_RESOLVER_PPS = 1024
MAX_PPS = 10_000_000
MAX_DURATION = 86_400
MAX_RESOLVERS = 32

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class RateLimitSpec:
    """A validated limit: packets per second, the bucket's size, what counts."""

    pps: int
    burst: int
    port: int
    resolvers: tuple[Address, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "pps": self.pps,
            "burst": self.burst,
            "port": self.port,
            "resolvers": [str(r) for r in self.resolvers],
        }


def _require_int(label: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{label}: expected an integer, got {value!r}")
    return int(require_range(label, value, low, high))


def _resolvers(value: Any) -> tuple[Address, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidArgument(f"resolvers: expected a list of IP addresses, got {value!r}")
    if len(value) > MAX_RESOLVERS:
        raise InvalidArgument(f"resolvers: {len(value)} addresses, at most {MAX_RESOLVERS}")
    found: list[Address] = []
    for item in value:
        try:
            found.append(ipaddress.ip_address(item))
        except (TypeError, ValueError):
            raise InvalidArgument(
                f"resolvers: {item!r} is not an IP address; give the resolver's address "
                "(e.g. the VPC resolver 169.254.169.253 or the VPC base + 2)"
            ) from None
    return tuple(dict.fromkeys(found))


def check_limit_arguments(arguments: Mapping[str, Any]) -> RateLimitSpec:
    """Validate every limit_dns_rate argument before anything is touched.

    ``burst`` 0 means one second's worth (``pps``): the VPC resolver counts
    packets per second, so a whole second's allowance may arrive at once.
    """
    pps = _require_int("pps", arguments.get("pps", VPC_RESOLVER_PPS), 1, MAX_PPS)
    burst = _require_int("burst", arguments.get("burst", 0), 0, MAX_PPS) or pps
    port = _require_int("port", arguments.get("port", 53), 1, 65_535)
    require_range("duration_seconds", arguments.get("duration_seconds", 0), 0, MAX_DURATION)
    return RateLimitSpec(pps, burst, port, _resolvers(arguments.get("resolvers")))


#: Our table's name for a fault token (hex, e.g. the first 12 chars of a uuid4).
table_name = _TABLES.name
is_our_table = _TABLES.ours
#: Our tables in a ``list tables`` answer (other tables are never looked at).
our_tables = _TABLES.in_listing
#: Delete exactly our table (and with it its chain, limit and counters).
delete_document = _TABLES.delete_document
_match = _nft_json.match
_items = _nft_json.items


def _rules(spec: RateLimitSpec, where: dict[str, str]) -> list[dict[str, Any]]:
    head = [
        _match({"meta": {"key": "oifname"}}, "lo", op="!="),
        _match({"meta": {"key": "l4proto"}}, {"set": ["tcp", "udp"]}),
        _match({"payload": {"protocol": "th", "field": "dport"}}, spec.port),
    ]
    tail = [{"counter": SEEN}, {"limit": LIMIT}, {"counter": DROPPED}, {"drop": None}]
    if not spec.resolvers:
        return [{"add": {"rule": {**where, "chain": CHAIN, "expr": [*head, *tail]}}}]
    rules = []
    for version, protocol in ((4, "ip"), (6, "ip6")):
        addresses = [str(a) for a in spec.resolvers if a.version == version]
        if addresses:
            daddr = _match(
                {"payload": {"protocol": protocol, "field": "daddr"}}, {"set": addresses}
            )
            expr = [*head, daddr, *tail]
            rules.append({"add": {"rule": {**where, "chain": CHAIN, "expr": expr}}})
    return rules


def ruleset(spec: RateLimitSpec, table: str) -> dict[str, Any]:
    """The libnftables JSON batch that creates our table (one transaction)."""
    where = {"family": FAMILY, "table": table}
    return {
        "nftables": [
            {"add": {"table": {"family": FAMILY, "name": table}}},
            {
                "add": {
                    "limit": {
                        **where,
                        "name": LIMIT,
                        "rate": spec.pps,
                        "per": "second",
                        "burst": spec.burst,
                        "inv": True,
                    }
                }
            },
            {"add": {"counter": {**where, "name": SEEN}}},
            {"add": {"counter": {**where, "name": DROPPED}}},
            {
                "add": {
                    "chain": {
                        **where,
                        "name": CHAIN,
                        "type": "filter",
                        "hook": "postrouting",
                        "prio": 0,
                        "policy": "accept",
                    }
                }
            },
            *_rules(spec, where),
        ]
    }


def counters_of(listing: Mapping[str, Any] | None, table: str) -> dict[str, Any]:
    """``packets``, ``dropped``, ``passed``, ``pps`` and ``burst`` from ``list table``."""
    found: dict[str, Any] = {"table": table}
    for item in _items(listing):
        counter, limit = item.get("counter"), item.get("limit")
        if counter and counter.get("table") == table:
            key = {SEEN: "packets", DROPPED: "dropped"}.get(counter.get("name"))
            if key:
                found[key] = int(counter.get("packets", 0))
        if limit and limit.get("table") == table and limit.get("name") == LIMIT:
            found["pps"], found["burst"] = int(limit["rate"]), int(limit.get("burst", 0))
    missing = {"packets", "dropped", "pps"} - found.keys()
    if missing:
        raise ValueError(f"table {table} lacks {sorted(missing)}: not one of ours, or changed")
    found["passed"] = found["packets"] - found["dropped"]
    return found
