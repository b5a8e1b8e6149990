"""DNS probes: resolution latency and failure ratios, dnsmasq's TCP child processes,
the packet-rate limit's drops.

In Kubernetes, the Prometheus form of :func:`dnsmasq_child_processes` is
``container_processes{container="dnsmasq"}`` (cAdvisor; children + 1).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dns.exception
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

from chaos_ext._core import procfs as _procfs
from chaos_ext._core.contract import Configuration, Secrets
from chaos_ext._core.percentile import LatencyRecorder
from chaos_ext._core.rbac import needs_k8s
from chaos_ext._core.targets.pod import RULES as POD_RULES
from chaos_ext._core.targets.spec import parse_target
from chaos_ext._core.validation import validated_by
from chaos_ext.dns import _nft
from chaos_ext.dns._checks import check_resolution_stats, with_defaults
from chaos_ext.dns.errors import DnsError
from chaos_ext.errors import InvalidArgument

__all__ = [
    "dns_rate_limit_drops",
    "dns_rate_limit_supported",
    "dns_resolution_stats",
    "dnsmasq_child_processes",
]


def _check_stats(arguments: Mapping[str, Any]) -> None:
    check_resolution_stats(with_defaults(dns_resolution_stats, arguments))


def _resolve_once(
    server: str, port: int, name: str, qtype: str, protocol: str, timeout: float
) -> tuple[float, str]:
    """One lookup: ``(seconds, outcome)``; a timeout takes ``timeout`` seconds."""
    query = dns.message.make_query(name, dns.rdatatype.from_text(qtype))
    send = dns.query.tcp if protocol == "tcp" else dns.query.udp
    started = time.monotonic()
    try:
        response = send(query, server, timeout=timeout, port=port)
    except dns.exception.Timeout:
        return timeout, "timeout"
    except (OSError, dns.exception.DNSException) as exc:
        return time.monotonic() - started, f"error:{type(exc).__name__}"
    elapsed = time.monotonic() - started
    if response.rcode() != dns.rcode.NOERROR:
        return elapsed, dns.rcode.to_text(response.rcode()).lower()
    return elapsed, "answer" if response.answer else "nodata"


@validated_by(_check_stats)
def dns_resolution_stats(
    server: str,
    name: str,
    port: int = 53,
    protocol: str = "udp",
    samples: int = 20,
    timeout_seconds: float = 1.0,
    qtype: str = "A",
    interval_seconds: float = 0.0,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Resolve a name ``samples`` times and report p50/p95/p99 ms, timeout and failure ratios.

    Queries go one after another (each TCP sample on a new connection, as a
    client without a cache does), ``interval_seconds`` apart. A timed-out
    sample counts ``timeout_seconds`` in the percentiles, so p99 shows the stall. A failure is any
    response without an answer (NXDOMAIN, SERVFAIL, REFUSED, NODATA) or a
    transport error. Pair with a tolerance such as
    ``{"type": "range", "target": "p99_ms", "range": [0, 100]}``.
    """
    latencies = LatencyRecorder()
    outcomes: dict[str, int] = {}
    for index in range(samples):
        if index and interval_seconds:
            time.sleep(interval_seconds)
        seconds, outcome = _resolve_once(server, port, name, qtype, protocol, timeout_seconds)
        latencies.add(seconds)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    timeouts = outcomes.get("timeout", 0)
    failures = samples - outcomes.get("answer", 0) - timeouts
    return {
        "server": server,
        "port": port,
        "name": name,
        "protocol": protocol,
        "samples": samples,
        "answered": outcomes.get("answer", 0),
        "timeouts": timeouts,
        "failures": failures,
        "timeout_ratio": round(timeouts / samples, 4),
        "failure_ratio": round(failures / samples, 4),
        "outcomes": outcomes,
        **latencies.summary_ms((50, 95, 99, 100)),
    }


def _root_by_port(port: int) -> int:
    listeners = {
        proc.pid: proc
        for proc in _procfs.processes("dnsmasq")
        if _procfs.listening_tcp_inodes(proc.pid, port) & _procfs.socket_inodes(proc.pid)
    }
    roots = sorted(pid for pid, proc in listeners.items() if proc.ppid not in listeners)
    if not roots:
        raise DnsError(f"no dnsmasq process listens on TCP port {port} on this host")
    if len(roots) > 1:
        raise DnsError(
            f"{len(roots)} dnsmasq processes listen on TCP port {port} (pids {roots},"
            " in different network namespaces): select one with pid or pidfile"
        )
    return roots[0]


def _root_pid(pid: int, pidfile: str, port: int) -> tuple[int, str]:
    given = [
        label for label, value in (("pid", pid), ("pidfile", pidfile), ("port", port)) if value
    ]
    if len(given) != 1:
        raise InvalidArgument(
            f"select the dnsmasq with exactly one of pid, pidfile or port (got {given or 'none'})"
        )
    if pidfile:
        try:
            pid = int(Path(pidfile).read_text().strip())
        except (OSError, ValueError) as exc:
            raise DnsError(f"cannot read a pid from pidfile {pidfile!r}: {exc}") from exc
        return pid, f"pidfile {pidfile}"
    if port:
        return _root_by_port(port), f"TCP port {port}"
    return pid, f"pid {pid}"


@validated_by()
def dnsmasq_child_processes(
    pid: int = 0,
    pidfile: str = "",
    port: int = 0,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Count the child processes a local dnsmasq forked to serve TCP (max 20 in 2.90).

    Select the dnsmasq with exactly one of ``pid``, ``pidfile`` or ``port``
    (the TCP port it listens on, in any network namespace of this host).
    Reads /proc only. Returns ``pid``, ``children`` and ``processes``
    (children + 1, what ``container_processes{container="dnsmasq"}`` shows in
    Kubernetes). Tolerance example: ``{"type": "range", "target":
    "children", "range": [0, 19]}``.
    """
    root, selector = _root_pid(pid, pidfile, port)
    found = _procfs.process(root)
    if found is None or found.comm != "dnsmasq":
        raise DnsError(f"{selector}: process {root} is not a running dnsmasq")
    children = sum(1 for proc in _procfs.processes("dnsmasq") if proc.ppid == root)
    return {"pid": root, "selected_by": selector, "children": children, "processes": children + 1}


def _check_target(arguments: Mapping[str, Any]) -> None:
    parse_target(arguments.get("target", "local"))


@validated_by(_check_target)
@needs_k8s(*POD_RULES)
def dns_rate_limit_drops(
    target: str = "local",
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Report the DNS packets the limit of limit_dns_rate saw and dropped on a target.

    Read-only: lists only our tables (``inet gameday_dnsrate_*``). Returns
    ``active`` (a limit is loaded), ``packets`` (DNS packets that left or
    tried to), ``dropped``, ``passed``, ``drop_ratio``, the limit's ``pps``
    and ``burst``, and one entry per table. Counters start at zero when the
    limit is loaded. Tolerance example: ``{"type": "range", "target":
    "dropped", "range": [0, 0]}`` (nothing dropped).
    """
    where = parse_target(target)
    with _nft.runner_for(where, configuration, secrets) as (runner, _):
        tables = [_nft.counters(runner, table) for table in _nft.list_ours(runner)]
    packets = sum(t["packets"] for t in tables)
    dropped = sum(t["dropped"] for t in tables)
    return {
        "target": where.where,
        "active": bool(tables),
        "packets": packets,
        "dropped": dropped,
        "passed": packets - dropped,
        "drop_ratio": round(dropped / packets, 4) if packets else 0.0,
        "pps": min((t["pps"] for t in tables), default=0),
        "burst": min((t["burst"] for t in tables), default=0),
        "tables": tables,
    }


@validated_by(_check_target)
@needs_k8s(*POD_RULES)
def dns_rate_limit_supported(
    target: str = "local",
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Preflight for limit_dns_rate on its own: CAP_NET_ADMIN, nftables, kernel; read-only.

    Builds the limit's table in a throw-away network namespace (never in the
    target's ruleset). Raises PreflightFailed naming what is missing (e.g.
    "kernel 6.1 on ssh:10.0.3.7:22 has no the nftables limit expression");
    returns the kernel release and how nftables is driven otherwise.
    """
    with _nft.runner_for(parse_target(target), configuration, secrets) as (runner, _):
        return runner.preflight()
