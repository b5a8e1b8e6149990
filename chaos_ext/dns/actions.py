"""DNS actions: hold dnsmasq's TCP slots, flood a resolver with bounded query load."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from chaos_ext import _helper
from chaos_ext._failpoint import failpoint
from chaos_ext._targets.pod import RULES as POD_RULES
from chaos_ext._targets.remote import identity_of
from chaos_ext._targets.spec import parse_target
from chaos_ext.dns import _nft, _ratelimit
from chaos_ext.dns._book import FloodPlan
from chaos_ext.dns._checks import check_flood, check_saturation, require_server, with_defaults
from chaos_ext.dns._flood import run_flood
from chaos_ext.dns._flood_workers import run_parallel
from chaos_ext.dns._search import candidates
from chaos_ext.dns._tcp_holder import CONNECT_WAVE
from chaos_ext.dns._wire import query_wire
from chaos_ext.errors import ChaosExtError, DnsError, TargetGone
from chaos_ext.ledger import (
    Entry,
    default_ledger,
    fault,
    in_scope,
    undo,
    undo_after,
    undo_handler,
)
from chaos_ext.rbac import needs_k8s
from chaos_ext.validation import check_types, validated_by

__all__ = [
    "flood_dns",
    "limit_dns_rate",
    "release_dnsmasq_tcp",
    "remove_dns_rate_limit",
    "saturate_dnsmasq_tcp",
]

HOLD_KIND = "dnsmasq-tcp-hold"
FLOOD_KIND = "dns-flood"
RATE_KIND = "dns-rate-limit"
_HOLDER = "chaos_ext.dns._tcp_holder"


def _check_saturation(arguments: Mapping[str, Any]) -> None:
    check_saturation(with_defaults(saturate_dnsmasq_tcp, arguments))


def _check_flood(arguments: Mapping[str, Any]) -> None:
    check_flood(with_defaults(flood_dns, arguments))


@validated_by(_check_saturation)
def saturate_dnsmasq_tcp(
    server: str,
    port: int = 53,
    connections: int = 25,
    hold_seconds: float = 60,
    query_name: str = "",
    connect_timeout: float = 3.0,
    configuration: dict[str, Any] | None = None,
    secrets: dict[str, Any] | None = None,
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
        "server": server, "port": port, "connections": connections,
        "hold_seconds": hold_seconds, "query_name": query_name, "connect_timeout": connect_timeout,
    }  # fmt: skip
    check_types(saturate_dnsmasq_tcp, args)
    check_saturation(args)
    server = args["server"] = require_server(server)  # one spelling for release_dnsmasq_tcp
    payload = {**args, "query_hex": query_wire(query_name).hex() if query_name else ""}
    waves = -(-connections // CONNECT_WAVE)  # each wave of connects may take connect_timeout
    recipe = {"server": server, "port": port, "connections": connections}
    with fault(kind=HOLD_KIND, target=f"{server}:{port}", recipe=recipe, module=__name__) as entry:
        try:
            handle = _helper.start_helper(
                module=_HOLDER, payload=payload, token=entry.id,
                ready_timeout=(waves + 1) * connect_timeout + 10,
            )  # fmt: skip
        except ChaosExtError as exc:
            raise DnsError(f"cannot hold TCP connections to {server}:{port}: {exc}") from exc
        default_ledger().update_recipe(entry.id, {**recipe, "pid": handle.pid})
        if not handle.ready.get("opened"):
            raise DnsError(
                f"no TCP connection to {server}:{port} could be opened within"
                f" {connect_timeout} s: is the resolver listening on TCP there?"
            )
    undo_after(entry, float(hold_seconds))
    return {
        "server": server, "port": port, "requested": connections,
        "hold_seconds": hold_seconds, "ledger_id": entry.id, **handle.ready,
    }  # fmt: skip


@undo_handler(HOLD_KIND)
def _release(entry: Entry) -> str:
    stopped = _helper.stop_helpers(entry.id)
    if not stopped:
        return f"no helper left holding connections to {entry.target} (hold time elapsed)"
    return f"stopped the helper holding TCP connections to {entry.target}; all closed"


@validated_by()
def release_dnsmasq_tcp(
    server: str = "", port: int = 0, include_dead_runs: bool = False
) -> dict[str, Any]:
    """Close the TCP connections this run holds with saturate_dnsmasq_tcp (all, or one server:port).

    Blast radius: only helpers this run started, found through the fault
    ledger; ``include_dead_runs`` adds holds left by runs whose runner is
    dead. Another live run's hold on the same server is never released.
    Idempotent: releasing nothing is fine. Use it in ``rollbacks`` after
    ``saturate_dnsmasq_tcp``.
    """
    wanted = require_server(server) if server else ""
    book = default_ledger()
    released = []
    for entry in in_scope(book.open_entries(), include_dead_runs=include_dead_runs):
        host, _, entry_port = entry.target.rpartition(":")
        if entry.kind != HOLD_KIND or (wanted and host != wanted):
            continue
        if port and int(entry_port) != port:
            continue
        outcome = undo(entry, book)
        if not outcome.ok:
            raise DnsError(f"could not release {entry.target}: {outcome.note}")
        released.append({"target": entry.target, "note": outcome.note})
    return {"released": len(released), "holds": released}


@validated_by(_check_flood)
def flood_dns(
    server: str,
    names: list[str],
    port: int = 53,
    qps: float = 100,
    duration: float = 10,
    protocol: str = "udp",
    search_domains: list[str] | None = None,
    ndots: int = 1,
    qtype: str = "A",
    timeout: float = 1.0,
    concurrency: int = 100,
    max_queries: int = 0,
    sockets: int = 4,
    workers: int = 1,
    configuration: dict[str, Any] | None = None,
    secrets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Send DNS queries to a resolver at a capped rate for a capped time, and report.

    Each name is resolved as a stub resolver would with ``search_domains`` and
    ``ndots`` (``ndots:5`` and a Kubernetes search list turn one lookup into
    several queries, NXDOMAIN counted). ``protocol`` "tcp" reuses connections
    like NodeLocal DNSCache with ``force_tcp``. At most ``qps`` queries/s, for
    at most ``duration`` s and ``max_queries`` queries (0: qps x duration),
    with at most ``concurrency`` in flight; it stops by itself. ``workers`` > 1
    splits the load over helper processes (for tens of thousands of queries/s).

    Blast radius: the named resolver only, for ``duration``. Nothing to roll
    back (the load ends with the action). Returns achieved QPS, answer,
    NXDOMAIN, NODATA, SERVFAIL, timeout counts, lookups, and p50/p95/p99 ms.
    """
    args = {
        "server": server, "names": names, "port": port, "qps": qps, "duration": duration,
        "protocol": protocol, "search_domains": search_domains, "ndots": ndots, "qtype": qtype,
        "timeout": timeout, "concurrency": concurrency, "max_queries": max_queries,
        "sockets": sockets, "workers": workers,
    }  # fmt: skip
    check_types(flood_dns, args)
    check_flood(args)
    search = search_domains or []
    wires = [[query_wire(c, qtype) for c in candidates(n, search, ndots)] for n in names]
    plan = FloodPlan(
        server=server, port=port, qps=float(qps), duration=float(duration),
        max_queries=max_queries or int(qps * duration) or 1, protocol=protocol,  # type: ignore[arg-type]
        timeout=float(timeout), concurrency=concurrency, sockets=sockets,
    )  # fmt: skip
    recipe = {"qps": qps, "duration": duration, "protocol": protocol}
    with fault(kind=FLOOD_KIND, target=f"{server}:{port}", recipe=recipe, module=__name__) as e:
        if workers > 1:
            report = run_parallel(plan, wires, workers, token=e.id)
        else:
            report = run_flood(plan, wires)
    undo(e)
    return {"server": server, "port": port, "protocol": protocol, "target_qps": qps, **report}


@undo_handler(FLOOD_KIND)
def _stop_flood(entry: Entry) -> str:
    # One worker runs inside the action and ends with it; more run as helper processes.
    stopped = _helper.stop_helpers(entry.id)
    return f"stopped {stopped} flood worker(s) of {entry.target}" if stopped else "flood over"


def _check_target(arguments: Mapping[str, Any]) -> None:
    parse_target(arguments.get("target", "local"))


def _check_limit(arguments: Mapping[str, Any]) -> None:
    _ratelimit.check_limit_arguments(arguments)
    _check_target(arguments)


@validated_by(_check_limit)
@needs_k8s(*POD_RULES)
def limit_dns_rate(
    pps: int = _ratelimit.VPC_RESOLVER_PPS,
    burst: int = 0,
    resolvers: list[str] | None = None,
    port: int = 53,
    duration: float = 0,
    target: str = "local",
    configuration: dict[str, Any] | None = None,
    secrets: dict[str, Any] | None = None,
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
    or ``gameday rollback`` deletes exactly that table; ``duration`` > 0
    removes it by itself. Probe the drops with ``dns_rate_limit_drops``.
    """
    arguments = {"pps": pps, "burst": burst, "resolvers": resolvers, "port": port,
                 "duration": duration, "target": target}  # fmt: skip
    check_types(limit_dns_rate, arguments)
    spec = _ratelimit.check_limit_arguments(arguments)
    where = parse_target(target)
    table = _ratelimit.table_name(uuid.uuid4().hex[:12])
    with _nft.runner_for(where, configuration, secrets) as (runner, connection):
        preflight = runner.preflight()
        present = _nft.list_ours(runner)
        if present:
            raise DnsError(
                f"{where.where} already has a DNS rate limit ({', '.join(present)}):"
                " remove it first (remove_dns_rate_limit)"
            )
        recipe = {"target": target, "table": table, "spec": spec.as_dict(),
                  "connection": connection}  # fmt: skip
        with fault(
            kind=RATE_KIND,
            target=where.where,
            recipe=recipe,
            module=__name__,
            identity=identity_of(connection),
        ) as entry:
            runner.run(_ratelimit.ruleset(spec, table))
            failpoint(f"{RATE_KIND}.mid-apply")  # loaded, not yet read back
            loaded = _nft.counters(runner, table)
    if duration:
        undo_after(entry, float(duration))
    return {
        "target": where.where, "table": f"{_ratelimit.FAMILY} {table}", "ledger_id": entry.id,
        **spec.as_dict(), "duration": duration, "kernel": preflight["kernel"],
        "via": preflight["via"], "loaded_pps": loaded["pps"], "loaded_burst": loaded["burst"],
    }  # fmt: skip


@undo_handler(RATE_KIND)
def _undo_rate_limit(entry: Entry) -> str:
    recipe = entry.recipe
    where = parse_target(recipe["target"])
    try:
        with _nft.runner_from_recipe(where, recipe.get("connection", {})) as runner:
            failpoint(f"{RATE_KIND}.mid-undo")  # reconnected, the table not yet deleted
            deleted = _nft.delete_table(runner, recipe["table"])
    except TargetGone as exc:
        return f"{entry.target}: target gone, and the limit with it ({exc})"
    if not deleted:
        return f"{entry.target}: table {recipe['table']} already gone"
    return f"{entry.target}: table {_ratelimit.FAMILY} {recipe['table']} deleted"


@validated_by(_check_target)
@needs_k8s(*POD_RULES)
def remove_dns_rate_limit(
    target: str = "local",
    include_dead_runs: bool = False,
    configuration: dict[str, Any] | None = None,
    secrets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Remove the DNS packet-rate limit of limit_dns_rate from a target (the rollback).

    Blast radius: our tables only (``inet gameday_dnsrate_*``); the rest of
    the target's ruleset is never read or changed. Deletes the tables this
    run recorded for ``target`` (``include_dead_runs``: also those of runs
    whose runner is dead); a live run's table is never removed. If the ledger
    lost them, deletes any table of ours that no open entry names.
    Idempotent: nothing to remove is fine.
    """
    where = parse_target(target)
    book = default_ledger()
    recorded = [e for e in book.open_entries() if e.kind == RATE_KIND and e.target == where.where]
    entries = in_scope(recorded, include_dead_runs=include_dead_runs)
    notes = []
    for entry in entries:
        outcome = undo(entry, book)
        if not outcome.ok:
            raise DnsError(f"could not remove the DNS rate limit on {where.where}: {outcome.note}")
        notes.append(outcome.note)
    others = {str(e.recipe.get("table")): e for e in recorded if e not in entries}
    notes += [f"left {t} alone: it belongs to run {e.run_id}" for t, e in others.items()]
    removed = len(entries)
    try:
        with _nft.runner_for(where, configuration, secrets) as (runner, _):
            for table in _nft.list_ours(runner):
                if table in others:
                    continue
                _nft.delete_table(runner, table)
                notes.append(f"{where.where}: table {table} without a ledger entry deleted")
                removed += 1
    except DnsError as exc:
        if "does not exist" not in str(exc):
            raise
        notes.append(f"{where.where}: the target is gone, and any limit with it")
    return {"target": where.where, "removed": removed, "notes": notes}
