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

from chaos_ext._core.contract import (
    Configuration,
    PlanCall,
    Secrets,
    plan_for,
    plan_result,
    preflight_check,
)
from chaos_ext._core.targets.access import reached, target_checks
from chaos_ext._core.targets.identity import namespace_key
from chaos_ext._core.targets.spec import LOCAL_KINDS, netns_path, parse_target
from chaos_ext.dns import _dnserr_plan, _nft, _ratelimit
from chaos_ext.dns._checks import require_server
from chaos_ext.dns._search import candidates
from chaos_ext.dns.actions import (
    flood_dns,
    inject_dns_errors,
    limit_dns_rate,
    saturate_dnsmasq_tcp,
)
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


@plan_for(saturate_dnsmasq_tcp)
def plan_saturate_dnsmasq_tcp(call: PlanCall) -> dict[str, Any]:
    """The resolver ``saturate_dnsmasq_tcp`` would hold, and how many of its TCP slots."""
    args = call.arguments
    server, port, connections = require_server(args["server"]), args["port"], args["connections"]
    hold_seconds = args["hold_seconds"]
    saturates = connections >= DNSMASQ_TCP_CHILDREN
    return plan_result(
        action="saturate_dnsmasq_tcp",
        targets=[f"{server}:{port}"],
        would=f"hold {connections} idle TCP connection(s) to {server}:{port} for"
        f" {hold_seconds:g} s ({'saturates' if saturates else 'does not saturate'}"
        f" dnsmasq's {DNSMASQ_TCP_CHILDREN} TCP children)",
        preflight=[_tcp_check(server, port, args["connect_timeout_seconds"])],
        blast_radius={
            "server": server,
            "port": port,
            "connections": connections,
            "hold_seconds": hold_seconds,
            "dnsmasq_tcp_children": DNSMASQ_TCP_CHILDREN,
            "udp_affected": False,
        },
    )


@plan_for(flood_dns)
def plan_flood_dns(call: PlanCall) -> dict[str, Any]:
    """The resolver ``flood_dns`` would query, at what rate, for how long; contacts nothing."""
    args = call.arguments
    server, port, protocol, qps = args["server"], args["port"], args["protocol"], args["qps"]
    duration_seconds = args["duration_seconds"]
    search, ndots = args["search_domains"] or [], args["ndots"]
    expanded = {n: candidates(n, search, ndots) for n in args["names"]}
    cap = args["max_queries"] or int(qps * duration_seconds) or 1
    return plan_result(
        action="flood_dns",
        targets=[f"{server}:{port}"],
        would=f"send at most {cap} {protocol.upper()} {args['qtype']} queries to {server}:{port}"
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
            "workers": args["workers"],
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


@plan_for(limit_dns_rate)
def plan_limit_dns_rate(call: PlanCall) -> dict[str, Any]:
    """The namespace, resolvers and nftables table ``limit_dns_rate`` would add; adds nothing."""
    spec: _ratelimit.RateLimitSpec = call.parsed  # checked and parsed once, by the action's check
    target, configuration, secrets = call.arguments["target"], call.configuration, call.secrets
    where = parse_target(target)
    table = f"{_ratelimit.FAMILY} {_ratelimit.TABLE_PREFIX}<12 hex, drawn at injection>"
    radius: dict[str, Any] = {
        "target": where.where,
        **spec.as_dict(),
        "table": table,
        "duration_seconds": call.arguments["duration_seconds"],
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
        would=f"add table {table} on {where.where}: DNS to {toward} port {call.arguments['port']}"
        f" capped at {spec.pps} packets/s",
        preflight=checks,
        blast_radius=radius,
    )


@plan_for(inject_dns_errors)
def plan_inject_dns_errors(call: PlanCall) -> dict[str, Any]:
    """Which names, which error, which resolvers and namespace ``inject_dns_errors`` would
    touch; touches nothing (see :mod:`chaos_ext.dns._dnserr_plan`)."""
    return _dnserr_plan.plan_of(call.parsed, call.configuration, call.secrets)
