"""Network probes: qdisc state of a target, measured round-trip time, netem preflight."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from typing import Any

from chaos_ext._core.contract import Configuration, Secrets
from chaos_ext._core.percentile import LatencyRecorder
from chaos_ext._core.rbac import needs_k8s
from chaos_ext._core.targets import netns as _netns
from chaos_ext._core.targets.pod import RULES as POD_RULES
from chaos_ext._core.validation import require_name, require_range, validated_by
from chaos_ext.errors import InvalidArgument
from chaos_ext.network import _connect, _spec
from chaos_ext.network.errors import NetworkError

__all__ = ["latency_supported", "measure_rtt", "qdisc_state"]


def _check_target(arguments: Mapping[str, Any]) -> None:
    _spec.check_target_arguments(arguments)


@validated_by(_check_target)
@needs_k8s(*POD_RULES)
def qdisc_state(
    interface: str,
    target: str = "local",
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Report the root qdisc tree of an interface and whether a latency fault is active.

    Read-only. Returns ``latency_active`` (bool), ``root_kind`` and the tree.
    """
    where, interface = _spec.check_target_arguments({"interface": interface, "target": target})
    with _connect.executor_for(where, configuration, secrets) as (executor, _):
        snap = executor.snapshot(interface)
    active = snap.get("latency_active")
    if active is None:
        active = any(i["handle"] == _spec.ROOT_HANDLE for i in snap.get("items", []))
    return {"target": where.label(interface), **snap, "latency_active": bool(active)}


@validated_by(_check_target)
@needs_k8s(*POD_RULES)
def latency_supported(
    interface: str,
    target: str = "local",
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Preflight for add_latency: kernel qdiscs, CAP_NET_ADMIN, the interface; read-only.

    Raises PreflightFailed naming what is missing (e.g. "kernel 6.18 on ... has
    no sch_netem"); returns the kernel release and features otherwise.
    """
    where, interface = _spec.check_target_arguments({"interface": interface, "target": target})
    with _connect.executor_for(where, configuration, secrets) as (executor, _):
        return executor.preflight(interface)


def _check_rtt(arguments: Mapping[str, Any]) -> None:
    _spec.require_host(arguments.get("host", ""))
    require_range("port", arguments.get("port", 0), 1, 65535)
    require_range("samples", arguments.get("samples", 20), 1, 1000)
    require_range("timeout_seconds", arguments.get("timeout_seconds", 2.0), 0.01, 30)
    if arguments.get("netns"):
        require_name("netns", arguments["netns"])


@validated_by(_check_rtt)
def measure_rtt(
    host: str,
    port: int,
    samples: int = 20,
    timeout_seconds: float = 2.0,
    netns: str = "",
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Measure TCP connect round-trip time to host:port (median, p95, min, max in ms).

    Read-only: opens and closes ``samples`` TCP connections (bounded: at most
    1000, each within ``timeout_seconds``), from this host or from inside network
    namespace ``netns``. Failed connects are counted, not timed.
    """
    times: list[float] = []
    errors: list[str] = []
    for _ in range(samples):
        try:
            times.append(_connect_time(host, port, timeout_seconds, netns))
        except OSError as exc:
            errors.append(str(exc))
    if not times:
        raise NetworkError(f"no TCP connect to {host}:{port} succeeded: {errors[-1]}")
    return {"host": host, "port": port, **_summarize(times), "failed": len(errors)}


def _summarize(times_ms: list[float]) -> dict[str, float | int]:
    """median / p95 / min / max of a list of milliseconds (``chaos_ext._core.percentile``)."""
    recorder = LatencyRecorder()
    for ms in times_ms:
        recorder.add(ms / 1000)
    summary = recorder.summary_ms((0, 50, 95, 100))
    return {
        "samples": len(times_ms),
        "median_ms": summary["p50_ms"] or 0.0,
        "p95_ms": summary["p95_ms"] or 0.0,
        "min_ms": summary["p0_ms"] or 0.0,
        "max_ms": summary["max_ms"] or 0.0,
    }


def _connect_time(host: str, port: int, timeout: float, ns: str) -> float:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = _socket_in(ns, family) if ns else socket.socket(family, socket.SOCK_STREAM)
    with sock:
        sock.settimeout(timeout)
        start = time.perf_counter()
        sock.connect((host, port))
        return (time.perf_counter() - start) * 1000


def _socket_in(ns: str, family: int) -> socket.socket:
    """A TCP socket created inside network namespace ``ns``."""
    path = f"/run/netns/{ns}"
    if not os.path.exists(path):
        raise InvalidArgument(f"netns: network namespace {ns!r} does not exist")
    return _netns.socket_in(path, family)
