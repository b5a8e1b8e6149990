"""Plans of the DNS faults: the resolver, the namespace and the nftables table each would touch.

``plan_limit_dns_rate`` checks the permissions (``targets.access``:
CAP_NET_ADMIN here, or SSH reachability and the SSH user's CAP_NET_ADMIN on
a remote target), then runs the action's preflight (CAP_NET_ADMIN,
libnftables or the node's nft, the kernel features probed in a scratch
namespace, as the action does) and lists the target's tables, nothing more:
the target's ruleset is not changed. ``plan_saturate_dnsmasq_tcp`` checks
that the resolver accepts TCP with one connection it closes at once;
``plan_flood_dns`` contacts nothing. None of them records a ledger entry.
"""

from __future__ import annotations

import socket
from typing import Any

from chaos_ext._core.contract import Configuration, Secrets, plan_result, preflight_check
from chaos_ext._core.targets.access import reached, target_checks
from chaos_ext._core.targets.identity import namespace_key
from chaos_ext._core.targets.spec import LOCAL_KINDS, netns_path, parse_target
from chaos_ext._core.validation import check_types
from chaos_ext.dns import _dnserr_plan, _nft, _ratelimit
from chaos_ext.dns._checks import check_flood, check_saturation, require_server
from chaos_ext.dns._search import candidates
from chaos_ext.dns.actions import flood_dns, saturate_dnsmasq_tcp
from chaos_ext.errors import ChaosExtError

__all__ = [
    "plan_flood_dns",
    "plan_inject_dns_errors",
    "plan_limit_dns_rate",
    "plan_saturate_dnsmasq_tcp",
]

DNSMASQ_TCP_CHILDREN = 20  # dnsmasq's MAX_PROCS: TCP queries served at once


def _tcp_check(server: str, port: int, timeout: float) -> dict[str, Any]:
    try:
        with socket.create_connection((server, port), timeout=timeout):
            pass
    except OSError as exc:
        return preflight_check("TCP reachable", False, f"{server}:{port}: {exc}")
    return preflight_check("TCP reachable", True, f"{server}:{port} accepts TCP")


def plan_saturate_dnsmasq_tcp(
    server: str,
    port: int = 53,
    connections: int = 25,
    hold_seconds: float = 60,
    query_name: str = "",
    connect_timeout_seconds: float = 3.0,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """The resolver ``saturate_dnsmasq_tcp`` would hold, and how many of its TCP slots."""
    args = {
        "server": server,
        "port": port,
        "connections": connections,
        "hold_seconds": hold_seconds,
        "query_name": query_name,
        "connect_timeout_seconds": connect_timeout_seconds,
    }
    check_types(saturate_dnsmasq_tcp, args)
    check_saturation(args)
    server = require_server(server)
    saturates = connections >= DNSMASQ_TCP_CHILDREN
    return plan_result(
        action="saturate_dnsmasq_tcp",
        targets=[f"{server}:{port}"],
        would=f"hold {connections} idle TCP connection(s) to {server}:{port} for"
        f" {hold_seconds:g} s ({'saturates' if saturates else 'does not saturate'}"
        f" dnsmasq's {DNSMASQ_TCP_CHILDREN} TCP children)",
        preflight=[_tcp_check(server, port, connect_timeout_seconds)],
        blast_radius={
            "server": server,
            "port": port,
            "connections": connections,
            "hold_seconds": hold_seconds,
            "dnsmasq_tcp_children": DNSMASQ_TCP_CHILDREN,
            "udp_affected": False,
        },
    )


def plan_flood_dns(
    server: str,
    names: list[str],
    port: int = 53,
    qps: float = 100,
    duration_seconds: float = 10,
    protocol: str = "udp",
    search_domains: list[str] | None = None,
    ndots: int = 1,
    qtype: str = "A",
    timeout_seconds: float = 1.0,
    concurrency: int = 100,
    max_queries: int = 0,
    sockets: int = 4,
    workers: int = 1,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """The resolver ``flood_dns`` would query, at what rate, for how long; contacts nothing."""
    args = {
        "server": server,
        "names": names,
        "port": port,
        "qps": qps,
        "duration_seconds": duration_seconds,
        "protocol": protocol,
        "search_domains": search_domains,
        "ndots": ndots,
        "qtype": qtype,
        "timeout_seconds": timeout_seconds,
        "concurrency": concurrency,
        "max_queries": max_queries,
        "sockets": sockets,
        "workers": workers,
    }
    check_types(flood_dns, args)
    check_flood(args)
    expanded = {n: candidates(n, search_domains or [], ndots) for n in names}
    cap = max_queries or int(qps * duration_seconds) or 1
    return plan_result(
        action="flood_dns",
        targets=[f"{server}:{port}"],
        would=f"send at most {cap} {protocol.upper()} {qtype} queries to {server}:{port}"
        f" at {qps:g}/s for at most {duration_seconds:g} s",
        preflight=[preflight_check("bounded", True, f"{cap} queries, {duration_seconds:g} s")],
        blast_radius={
            "server": server,
            "port": port,
            "protocol": protocol,
            "qps": qps,
            "duration_seconds": duration_seconds,
            "max_queries": cap,
            "queries_per_lookup": {n: len(c) for n, c in expanded.items()},
            "workers": workers,
        },
    )


def _rate_limit_checks(
    where: Any, configuration: Configuration, secrets: Secrets
) -> list[dict[str, Any]]:
    """The action's preflight, then whether a limit of ours is there already (a refusal)."""
    try:
        with _nft.runner_for(where, configuration, secrets) as (runner, _connection):
            info = runner.preflight()
            ready = preflight_check(
                "nftables and CAP_NET_ADMIN", True, f"kernel {info['kernel']} via {info['via']}"
            )
            present = _nft.list_ours(runner)
    except ChaosExtError as exc:
        return [preflight_check("nftables and CAP_NET_ADMIN", False, str(exc))]
    detail = f"already limited ({', '.join(present)}): remove it first" if present else "none"
    return [ready, preflight_check("no rate limit there yet", not present, detail)]


def plan_limit_dns_rate(
    pps: int = _ratelimit.VPC_RESOLVER_PPS,
    burst: int = 0,
    resolvers: list[str] | None = None,
    port: int = 53,
    duration_seconds: float = 0,
    target: str = "local",
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """The namespace, resolvers and nftables table ``limit_dns_rate`` would add; adds nothing."""
    arguments = {
        "pps": pps,
        "burst": burst,
        "resolvers": resolvers,
        "port": port,
        "duration_seconds": duration_seconds,
        "target": target,
    }
    spec = _ratelimit.check_limit_arguments(arguments)
    where = parse_target(target)
    table = f"{_ratelimit.FAMILY} {_ratelimit.TABLE_PREFIX}<12 hex, drawn at injection>"
    radius: dict[str, Any] = {
        "target": where.where,
        **spec.as_dict(),
        "table": table,
        "duration_seconds": duration_seconds,
    }
    if where.kind in LOCAL_KINDS:
        radius["netns"] = netns_path(where) or "this host's namespace"
        radius["netns_key"] = namespace_key(where)
    checks = target_checks(where, configuration, secrets)  # CAP_NET_ADMIN, SSH reachable
    if reached(where, checks):
        checks += _rate_limit_checks(where, configuration, secrets)
    toward = ", ".join(radius["resolvers"]) or "any resolver"
    return plan_result(
        action="limit_dns_rate",
        targets=[where.where],
        would=f"add table {table} on {where.where}: DNS to {toward} port {port}"
        f" capped at {spec.pps} packets/s",
        preflight=checks,
        blast_radius=radius,
    )


def plan_inject_dns_errors(
    patterns: list[str],
    error: str,
    target: str = "local",
    resolvers: list[str] | None = None,
    percent: int = 100,
    duration_seconds: float = 60,
    port: int = 53,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Which names, which error, which resolvers and namespace ``inject_dns_errors`` would
    touch; touches nothing (see :mod:`chaos_ext.dns._dnserr_plan`)."""
    arguments = {
        "patterns": patterns,
        "error": error,
        "target": target,
        "resolvers": resolvers,
        "percent": percent,
        "duration_seconds": duration_seconds,
        "port": port,
    }
    return _dnserr_plan.plan_inject_dns_errors(arguments, configuration, secrets)
