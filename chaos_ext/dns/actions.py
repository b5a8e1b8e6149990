"""DNS actions: hold dnsmasq's TCP slots, flood a resolver with bounded query load."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chaos_ext._core import helper as _helper
from chaos_ext._core.contract import (
    LEDGER_ID,
    Configuration,
    Secrets,
    fault_action,
    roll_back,
    rollback_activity,
)
from chaos_ext._core.ledger import default_ledger, fault, undo, undo_after
from chaos_ext._core.rbac import needs_k8s
from chaos_ext._core.targets.identity import entries_on
from chaos_ext._core.targets.pod import RULES as POD_RULES
from chaos_ext._core.targets.spec import parse_target
from chaos_ext._core.validation import PARSED, validated_by
from chaos_ext.dns import _dnserr_actions, _ratelimit, _ratelimit_actions, _sweep
from chaos_ext.dns._checks import (
    check_flood,
    check_saturation,
    entries_at,
    require_server,
    with_defaults,
)
from chaos_ext.dns._dnserr import ErrorSpec
from chaos_ext.dns._flood import run_flood
from chaos_ext.dns._flood_workers import run_parallel
from chaos_ext.dns._search import candidates
from chaos_ext.dns._tally import FloodPlan
from chaos_ext.dns._tcp_holder import CONNECT_WAVE
from chaos_ext.dns._wire import query_wire
from chaos_ext.dns.errors import DnsError
from chaos_ext.errors import ChaosExtError

__all__ = [
    "flood_dns",
    "inject_dns_errors",
    "limit_dns_rate",
    "release_dnsmasq_tcp",
    "remove_dns_errors",
    "remove_dns_rate_limit",
    "saturate_dnsmasq_tcp",
    "stop_dns_flood",
]

HOLD_KIND = "dnsmasq-tcp-hold"
FLOOD_KIND = "dns-flood"
RATE_KIND = _sweep.RATE_KIND
_HOLDER = "chaos_ext.dns._tcp_holder"


def _check_saturation(arguments: Mapping[str, Any]) -> None:
    check_saturation(with_defaults(saturate_dnsmasq_tcp, arguments))


def _check_flood(arguments: Mapping[str, Any]) -> None:
    check_flood(with_defaults(flood_dns, arguments))


@fault_action(rollback="release_dnsmasq_tcp")
@validated_by(_check_saturation)
def saturate_dnsmasq_tcp(
    server: str,
    port: int = 53,
    connections: int = 25,
    hold_seconds: float = 60,
    query_name: str = "",
    connect_timeout_seconds: float = 3.0,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Hold idle TCP connections open to a DNS server so its TCP slots run out.

    dnsmasq (kube-dns) serves TCP with at most 20 child processes: 20 idle
    connections, as NodeLocal DNSCache with ``force_tcp`` keeps, make the
    21st TCP query wait or time out while UDP still answers. With
    ``query_name`` each connection first sends one query, then idles.

    Blast radius: TCP service of ``server:port`` only, for at most
    ``hold_seconds`` (the helper process holding the connections stops by
    itself). Rollback: ``release_dnsmasq_tcp`` (or ``rollback_faults``);
    after a killed runner, ``gameday rollback`` releases them.
    Returns ``opened``, ``failed``, ``held``, ``answered``, the helper's
    ``pid`` and ``rss_kib``, and the ledger entry id.
    """
    args = {
        "server": server,
        "port": port,
        "connections": connections,
        "hold_seconds": hold_seconds,
        "query_name": query_name,
        "connect_timeout_seconds": connect_timeout_seconds,
    }
    server = args["server"] = require_server(server)  # one spelling for release_dnsmasq_tcp
    payload = {**args, "query_hex": query_wire(query_name).hex() if query_name else ""}
    waves = -(-connections // CONNECT_WAVE)  # each wave of connects may take the timeout
    recipe = {
        "server": server,
        "port": port,
        "connections": connections,
        "hold_seconds": hold_seconds,
    }
    with fault(kind=HOLD_KIND, target=f"{server}:{port}", recipe=recipe, module=__name__) as entry:
        try:
            handle = _helper.start_helper(
                module=_HOLDER,
                payload=payload,
                token=entry.id,
                ready_timeout=(waves + 1) * connect_timeout_seconds + 10,
            )
        except ChaosExtError as exc:
            raise DnsError(f"cannot hold TCP connections to {server}:{port}: {exc}") from exc
        default_ledger().update_recipe(entry.id, {**recipe, "pid": handle.pid})
        if not handle.ready.get("opened"):
            raise DnsError(
                f"no TCP connection to {server}:{port} could be opened within"
                f" {connect_timeout_seconds} s: is the resolver listening on TCP there?"
            )
    undo_after(entry, float(hold_seconds))
    return {
        "server": server,
        "port": port,
        "requested": connections,
        "hold_seconds": hold_seconds,
        LEDGER_ID: entry.id,
        **handle.ready,
    }


@rollback_activity
@validated_by()
def release_dnsmasq_tcp(
    server: str = "",
    port: int = 0,
    include_dead_runs: bool = False,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Close the TCP connections this run holds with saturate_dnsmasq_tcp (its rollback).

    Blast radius: only helpers this run started (all, or one ``server``
    / ``port``), found through the fault ledger; ``include_dead_runs`` adds
    holds left by runs whose runner is dead. Another live run's hold on the
    same server is never released (listed under ``left_alone``). Idempotent:
    releasing nothing is fine. Raises RollbackFailed if a helper could not be
    stopped. Use it in ``rollbacks`` after ``saturate_dnsmasq_tcp``.
    """
    book = default_ledger()
    held = [e for e in book.open_entries() if e.kind == HOLD_KIND]
    return roll_back(entries_at(held, server, port), book, include_dead_runs=include_dead_runs)


@fault_action(rollback="stop_dns_flood")
@validated_by(_check_flood)
def flood_dns(
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
    """Send DNS queries to a resolver at a capped rate for a capped time, and report.

    Each name is resolved as a stub resolver would with ``search_domains`` and
    ``ndots`` (``ndots:5`` and a Kubernetes search list turn one lookup into
    several queries, NXDOMAIN counted). ``protocol`` "tcp" reuses connections
    like NodeLocal DNSCache with ``force_tcp``. At most ``qps`` queries/s, for
    at most ``duration_seconds`` and ``max_queries`` queries (0: qps x
    duration), with at most ``concurrency`` in flight, each answered within
    ``timeout_seconds`` or counted as a timeout; it stops by itself.
    ``workers`` > 1 splits the load over helper processes (for tens of
    thousands of queries/s).

    Blast radius: the named resolver only, for ``duration_seconds``. It
    blocks until the flood is over and then closes its ledger entry; run
    with ``"background": true``, pair it with ``stop_dns_flood`` (its
    rollback). Returns achieved QPS, answer, NXDOMAIN, NODATA, SERVFAIL,
    timeout counts, lookups, p50/p95/p99 ms and ``ledger_id``.
    """
    search = search_domains or []
    wires = [[query_wire(c, qtype) for c in candidates(n, search, ndots)] for n in names]
    plan = FloodPlan(
        server=server,
        port=port,
        qps=float(qps),
        duration=float(duration_seconds),
        max_queries=max_queries or int(qps * duration_seconds) or 1,
        protocol=protocol,  # type: ignore[arg-type]
        timeout=float(timeout_seconds),
        concurrency=concurrency,
        sockets=sockets,
    )
    recipe = {"qps": qps, "duration_seconds": duration_seconds, "protocol": protocol}
    with fault(kind=FLOOD_KIND, target=f"{server}:{port}", recipe=recipe, module=__name__) as e:
        if workers > 1:
            report = run_parallel(plan, wires, workers, token=e.id)
        else:
            report = run_flood(plan, wires)
    undo(e)
    return {
        "server": server,
        "port": port,
        "protocol": protocol,
        "target_qps": qps,
        **report,
        LEDGER_ID: e.id,
    }


@rollback_activity
@validated_by()
def stop_dns_flood(
    server: str = "",
    port: int = 0,
    include_dead_runs: bool = False,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Stop the floods this run started with flood_dns that still run (its rollback).

    Useful when ``flood_dns`` runs in the background (``"background": true``)
    and the experiment ends first. Blast radius: only this run's floods (all,
    or one ``server`` / ``port``; ``include_dead_runs``: also floods of runs
    whose runner is dead; never a live run's, listed under ``left_alone``):
    their worker processes are stopped (a single in-process flood ends at
    its ``duration_seconds``). Idempotent: a flood that already ended is
    fine. Raises RollbackFailed if a worker could not be stopped.
    """
    book = default_ledger()
    floods = [e for e in book.open_entries() if e.kind == FLOOD_KIND]
    return roll_back(entries_at(floods, server, port), book, include_dead_runs=include_dead_runs)


def _check_target(arguments: Mapping[str, Any]) -> None:
    if arguments.get("target", "local"):
        parse_target(arguments.get("target", "local"))


def _check_limit(arguments: Mapping[str, Any]) -> _ratelimit.RateLimitSpec:
    _check_target(arguments)
    return _ratelimit.check_limit_arguments(arguments)


@fault_action(rollback="remove_dns_rate_limit")
@validated_by(_check_limit)
@needs_k8s(*POD_RULES)
def limit_dns_rate(
    pps: int = _ratelimit.VPC_RESOLVER_PPS,
    burst: int = 0,
    resolvers: list[str] | None = None,
    port: int = 53,
    duration_seconds: float = 0,
    target: str = "local",
    configuration: Configuration = None,
    secrets: Secrets = None,
    *,
    parsed: _ratelimit.RateLimitSpec = PARSED,
) -> dict[str, Any]:
    """Cap the DNS packets per second a target sends, as the VPC resolver's limit does.

    UDP and TCP packets to ``port`` (53) leaving ``target`` (optionally only
    towards ``resolvers``) share one token bucket of ``pps`` packets/s
    (default 1,024, the AWS VPC resolver's per-interface limit) and ``burst``
    packets (0: one second's worth); the excess is dropped. Target is
    ``local``, ``netns:NAME``, ``pid:PID``, ``ssh:HOST[:PORT]`` or
    ``pod:NAMESPACE/NAME[/CONTAINER]``, as for ``add_latency``.

    Blast radius: DNS packets leaving the target through any interface but
    loopback; nothing else. One nftables table of ours (``inet
    gameday_dnsrate_<id>``), loaded in one transaction after a preflight
    (CAP_NET_ADMIN, libnftables or the node's nft, kernel nf_tables + limit)
    and recorded in the fault ledger first. Rollback: ``remove_dns_rate_limit``
    or ``gameday rollback`` deletes exactly that table; ``duration_seconds``
    > 0 removes it by itself. Probe the drops with ``dns_rate_limit_drops``.
    Returns the table, the limit, what the kernel loaded and ``ledger_id``.
    """
    return _ratelimit_actions.apply_rate_limit(
        parsed, target, float(duration_seconds), configuration, secrets
    )


@rollback_activity
@validated_by(_check_target)
@needs_k8s(*POD_RULES)
def remove_dns_rate_limit(
    target: str = "",
    include_dead_runs: bool = False,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Remove the DNS packet-rate limit of limit_dns_rate (its rollback).

    Blast radius: our tables only (``inet gameday_dnsrate_*``); the rest of
    a target's ruleset is never read or changed. Deletes the tables this run
    recorded (on ``target`` if given, by its network namespace, however the
    entry spelled it; ``include_dead_runs``: also those of runs whose runner
    is dead); a live run's table is never removed (listed under
    ``left_alone``). With ``target`` given, a table of ours there that no
    open entry of any ledger on this machine names (the ledger lost it) is
    deleted too; ``unrecorded`` says what was deleted and what was left
    alone, and why. Idempotent: nothing to remove is fine; a target that is
    gone took its limit with it. Raises RollbackFailed if a table could not
    be deleted.
    """
    where = parse_target(target) if target else None
    book = default_ledger()
    recorded = [e for e in book.open_entries() if e.kind == RATE_KIND]
    if where is not None:
        recorded = entries_on(recorded, where)
    result = roll_back(recorded, book, include_dead_runs=include_dead_runs)
    if where is not None:
        result["unrecorded"] = _sweep.remove_unrecorded(where, configuration, secrets)
    return result


@fault_action(rollback="remove_dns_errors")
@validated_by(_dnserr_actions.check_inject)
@needs_k8s(*POD_RULES)
def inject_dns_errors(
    patterns: list[str],
    error: str,
    target: str = "local",
    resolvers: list[str] | None = None,
    percent: int = 100,
    duration_seconds: float = 60,
    port: int = 53,
    configuration: Configuration = None,
    secrets: Secrets = None,
    *,
    parsed: ErrorSpec = PARSED,
) -> dict[str, Any]:
    """Answer the target's DNS queries for some names with an error (NXDOMAIN, SERVFAIL...).

    Queries leaving ``target`` (``local``, ``netns:NAME``, ``pid:PID``,
    ``ssh:HOST[:PORT]`` or ``pod:NAMESPACE/NAME[/CONTAINER]``, as for
    ``limit_dns_rate``) for ``resolvers`` (default: its resolv.conf nameservers) on ``port``,
    over UDP and TCP, go through a proxy in its network namespace. A query
    whose name matches one of ``patterns`` (as Chaos Mesh DNSChaos: exact
    names, ``?`` one character, ``*`` at the end anything; case-insensitive)
    gets ``error`` in ``percent`` % of cases: ``nxdomain``, ``servfail``,
    ``refused``, ``timeout`` (no answer at all) or ``random-ip`` (an A/AAAA
    answer with a random address). Every other query is forwarded to the
    resolver it was sent to and its answer returned unchanged.

    Blast radius: DNS lookups from the target's network namespace only, for
    ``duration_seconds`` (then undone by itself; the proxy also stops at its
    own cap and removes its redirect). One nftables table of ours (``inet
    gameday_dnserr_<id>``) and one proxy process, recorded in the fault
    ledger first. On a node (``ssh:``, ``pod:``) the node's ``nft``, its
    ``python3`` (>= 3.9: the proxy is shipped as a zip of standard-library
    modules into ``/run/gameday/dnserr/``) and, to forget the redirected
    flows at once, its ``conntrack``; a root SSH user. TCP connections
    already open when it starts are not intercepted. Rollback:
    ``remove_dns_errors`` or ``gameday rollback``.
    Returns the table, the resolvers, the proxy's pid and ports and ``ledger_id``.
    """
    return _dnserr_actions.apply_dns_errors(parsed, configuration, secrets)


@rollback_activity
@validated_by(_dnserr_actions.check_remove)
@needs_k8s(*POD_RULES)
def remove_dns_errors(
    target: str = "",
    include_dead_runs: bool = False,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Stop the DNS errors of inject_dns_errors (its rollback).

    Blast radius: our tables (``inet gameday_dnserr_*``) and proxies only,
    those this run recorded (on ``target`` if given, by its network
    namespace however the entry spelled it; ``include_dead_runs``: also
    those of runs whose runner is dead); a live run's are never touched
    (listed under ``left_alone``). Each: the table deleted, the conntrack
    entries redirected to the proxy deleted (lookups work at once), the
    proxy stopped. Idempotent: nothing to remove is fine. Raises
    RollbackFailed if one could not be removed.
    """
    book = default_ledger()
    recorded = _dnserr_actions.open_entries(target)
    return roll_back(recorded, book, include_dead_runs=include_dead_runs)
