"""DNS actions: hold dnsmasq's TCP slots, flood a resolver with bounded query load."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chaos_ext import _helper
from chaos_ext.dns._book import FloodPlan
from chaos_ext.dns._checks import check_flood, check_saturation, require_server, with_defaults
from chaos_ext.dns._flood import run_flood
from chaos_ext.dns._flood_workers import run_parallel
from chaos_ext.dns._search import candidates
from chaos_ext.dns._tcp_holder import CONNECT_WAVE
from chaos_ext.dns._wire import query_wire
from chaos_ext.errors import ChaosExtError, DnsError
from chaos_ext.ledger import (
    Entry,
    default_ledger,
    fault,
    in_scope,
    undo,
    undo_after,
    undo_handler,
)
from chaos_ext.validation import check_types, validated_by

__all__ = ["flood_dns", "release_dnsmasq_tcp", "saturate_dnsmasq_tcp"]

HOLD_KIND = "dnsmasq-tcp-hold"
FLOOD_KIND = "dns-flood"
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
