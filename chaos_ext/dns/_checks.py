"""Argument checks for the DNS activities (pure; shared with ``gameday validate``).

Every load has a rate cap and a time cap; targets must be IP addresses (a
host name would be resolved through this machine's own resolver). The
limits below are deliberately generous for a game day and refuse typos such
as ``qps: 1e9`` before anything is sent.
"""

from __future__ import annotations

import inspect
import ipaddress
from collections.abc import Callable, Mapping
from typing import Any

from chaos_ext._core.ledger import Entry
from chaos_ext._core.validation import require_range
from chaos_ext.dns._search import candidates
from chaos_ext.dns._wire import query_wire
from chaos_ext.errors import InvalidArgument

__all__ = [
    "MAX_CONNECTIONS",
    "MAX_QPS",
    "check_flood",
    "check_resolution_stats",
    "check_saturation",
    "entries_at",
    "require_server",
    "with_defaults",
]

MAX_CONNECTIONS = 20_000
MAX_HOLD_SECONDS = 3_600
MAX_QPS = 100_000
MAX_DURATION = 3_600
MAX_TOTAL_QUERIES = 20_000_000
MAX_NAMES = 1_000
MAX_SEARCH_DOMAINS = 32
MAX_NDOTS = 15
MAX_UDP_CONCURRENCY = 10_000
MAX_TCP_CONNECTIONS = 1_000
MAX_SOCKETS = 64
MAX_WORKERS = 8
MAX_SAMPLES = 10_000
MAX_PROBE_SECONDS = 600
QTYPES = frozenset({"A", "AAAA", "SRV", "TXT", "MX", "PTR", "CNAME", "NS", "SOA"})


def with_defaults(func: Callable[..., Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` completed with ``func``'s defaults."""
    merged = {
        name: param.default
        for name, param in inspect.signature(func).parameters.items()
        if param.default is not inspect.Parameter.empty
    }
    merged.update(arguments)
    return merged


def require_server(value: Any) -> str:
    """An IP address literal (never a name: that would ask this machine's resolver)."""
    try:
        return str(ipaddress.ip_address(value))
    except (TypeError, ValueError):
        raise InvalidArgument(
            f"server: {value!r} is not an IP address; give the resolver's address"
            " (e.g. the kube-dns Service IP), not a host name"
        ) from None


def _require_int(label: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{label}: expected an integer, got {value!r}")
    return int(require_range(label, value, low, high))


def _require_common(args: Mapping[str, Any]) -> None:
    require_server(args.get("server"))
    _require_int("port", args.get("port"), 1, 65_535)


def check_saturation(args: Mapping[str, Any]) -> None:
    """Arguments of ``saturate_dnsmasq_tcp`` (defaults applied)."""
    _require_common(args)
    _require_int("connections", args["connections"], 1, MAX_CONNECTIONS)
    require_range("hold_seconds", args["hold_seconds"], 1, MAX_HOLD_SECONDS)
    require_range("connect_timeout_seconds", args["connect_timeout_seconds"], 0.1, 60)
    if args["query_name"]:
        query_wire(args["query_name"])


def _require_names(args: Mapping[str, Any]) -> None:
    names, search = args["names"], args["search_domains"] or []
    if not isinstance(names, list) or not names or len(names) > MAX_NAMES:
        raise InvalidArgument(f"names: expected a list of 1 to {MAX_NAMES} names, got {names!r}")
    if not isinstance(search, list) or len(search) > MAX_SEARCH_DOMAINS:
        raise InvalidArgument(
            f"search_domains: expected a list of at most {MAX_SEARCH_DOMAINS} domains,"
            f" got {search!r}"
        )
    ndots = _require_int("ndots", args["ndots"], 0, MAX_NDOTS)
    if args["qtype"] not in QTYPES:
        raise InvalidArgument(f"qtype: {args['qtype']!r} is not one of {sorted(QTYPES)}")
    for name in names:
        if not isinstance(name, str) or not name.strip("."):
            raise InvalidArgument(f"names: {name!r} is not a DNS name")
        for candidate in candidates(name, search, ndots):
            query_wire(candidate, args["qtype"])


def check_flood(args: Mapping[str, Any]) -> None:
    """Arguments of ``flood_dns`` (defaults applied): caps on rate, time and count."""
    _require_common(args)
    require_range("qps", args["qps"], 1, MAX_QPS)
    require_range("duration_seconds", args["duration_seconds"], 0.1, MAX_DURATION)
    require_range("timeout_seconds", args["timeout_seconds"], 0.05, 30)
    _require_int("max_queries", args["max_queries"], 0, MAX_TOTAL_QUERIES)
    _require_int("sockets", args["sockets"], 1, MAX_SOCKETS)
    _require_int("workers", args["workers"], 1, MAX_WORKERS)
    if args["protocol"] not in ("udp", "tcp"):
        raise InvalidArgument(f"protocol: {args['protocol']!r} is not 'udp' or 'tcp'")
    limit = MAX_TCP_CONNECTIONS if args["protocol"] == "tcp" else MAX_UDP_CONCURRENCY
    _require_int("concurrency", args["concurrency"], 1, limit)
    total = args["qps"] * args["duration_seconds"]
    if not args["max_queries"] and total > MAX_TOTAL_QUERIES:
        raise InvalidArgument(
            f"qps x duration_seconds = {total:.0f} queries is more than {MAX_TOTAL_QUERIES};"
            " lower one of them or set max_queries"
        )
    _require_names(args)


def check_resolution_stats(args: Mapping[str, Any]) -> None:
    """Arguments of ``dns_resolution_stats`` (defaults applied)."""
    _require_common(args)
    samples = _require_int("samples", args["samples"], 1, MAX_SAMPLES)
    timeout = require_range("timeout_seconds", args["timeout_seconds"], 0.05, 30)
    interval = require_range("interval_seconds", args["interval_seconds"], 0, 10)
    if args["protocol"] not in ("udp", "tcp"):
        raise InvalidArgument(f"protocol: {args['protocol']!r} is not 'udp' or 'tcp'")
    if samples * (timeout + interval) > MAX_PROBE_SECONDS:
        raise InvalidArgument(
            f"samples x (timeout_seconds + interval_seconds) = {samples * (timeout + interval):.0f}"
            f" s could exceed {MAX_PROBE_SECONDS} s; take fewer samples or a shorter timeout"
        )
    if args["qtype"] not in QTYPES:
        raise InvalidArgument(f"qtype: {args['qtype']!r} is not one of {sorted(QTYPES)}")
    query_wire(args["name"], args["qtype"])


def entries_at(entries: list[Entry], server: str, port: int) -> list[Entry]:
    """The entries whose ``server:port`` target matches (empty server or port 0: any)."""
    wanted = require_server(server) if server else ""
    found = []
    for entry in entries:
        host, _, entry_port = entry.target.rpartition(":")
        if (not wanted or host == wanted) and (not port or int(entry_port) == port):
            found.append(entry)
    return found
