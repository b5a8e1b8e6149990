"""The load helper process: forks the workers, serves /metrics, holds until done.

Run by :func:`chaos_ext._core.helper.start_helper` as ``python -m
chaos_ext.load._coordinator`` with ``{"spec": ..., "results_dir": ...}`` on
stdin. It forks ``spec.processes`` workers that share one schedule (worker i
takes every i-th arrival). Once every worker has built its client they all
start at the same wall-clock instant; a worker that cannot (bad CA file...)
makes the helper fail to start, with its error, before anything is sent. It
writes ``meta.json`` (when, what; no headers or body) and, at the end,
``done.json`` (``completed``, ``stopped``, ``capped`` or ``failed`` when a
worker died of an error, quoted in ``errors``).

Every process inherits the helper token, so ``stop_helpers`` finds the
workers as well; workers also die with the coordinator (PDEATHSIG) and on
their own hard cap. The coordinator's own cap is the profile's duration plus
the request timeout plus a margin (plus :data:`METRICS_LINGER` when it
serves /metrics, so the final counts can be scraped).
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chaos_ext._core.helper import serve
from chaos_ext.load._engine import Handshake, run_worker
from chaos_ext.load.errors import LoadError
from chaos_ext.load.spec import LoadSpec

__all__ = ["work"]

METRICS_LINGER = 15.0  # seconds /metrics stays up after the load ends (unless stopped)
_START_LEAD = 0.05  # seconds between "go" and the first arrival
_READY_TIMEOUT = 15.0


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def _start_workers(
    spec: LoadSpec, payload: dict[str, Any], results: Path
) -> tuple[list[multiprocessing.process.BaseProcess], Handshake]:
    ctx = multiprocessing.get_context("fork")
    handshake = Handshake(ctx)
    procs: list[multiprocessing.process.BaseProcess] = []
    for index in range(spec.processes):
        out = str(results / f"worker-{index}.jsonl")
        proc = ctx.Process(
            target=run_worker,
            args=(payload["spec"], index, spec.processes, out, handshake),
            name=f"gameday-load-{index}",
        )
        proc.start()
        procs.append(proc)
    return procs, handshake


def _await_workers(procs: list[multiprocessing.process.BaseProcess], handshake: Handshake) -> None:
    """Every worker built its client, or raise with the first error (then nothing was sent)."""
    deadline = time.monotonic() + _READY_TIMEOUT
    pending = set(range(len(procs)))
    while pending:
        try:
            index, error = handshake.reports.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            raise LoadError(f"load workers {sorted(pending)} not ready in time") from None
        if error:
            raise LoadError(f"load worker {index} cannot start: {error}")
        pending.discard(index)


def _stop_workers(procs: list[multiprocessing.process.BaseProcess]) -> None:
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + 3
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.kill()
            proc.join(1)


def work(
    payload: dict[str, Any], ready: Callable[[dict[str, Any]], None], stop: threading.Event
) -> None:
    spec = LoadSpec.from_payload(payload["spec"])
    results = Path(payload["results_dir"])
    results.mkdir(parents=True, exist_ok=True)
    label = str(payload.get("label") or spec.name or "load")
    procs, handshake = _start_workers(spec, payload, results)
    try:
        _await_workers(procs, handshake)
    except LoadError:
        _stop_workers(procs)
        raise
    start = spec.start_at or time.time() + _START_LEAD  # shards of a Job share start_at
    end = start + spec.duration
    handshake.start.value = start
    handshake.go.set()
    server, metrics_port = None, 0
    if spec.metrics_port:
        from chaos_ext.load._metrics import serve_metrics  # noqa: PLC0415 - only when asked

        server, metrics_port = serve_metrics(
            spec, results, label, start, spec.metrics_port, spec.metrics_addr
        )
    info = {
        "pid": os.getpid(),
        "start": start,
        "end": end,
        "processes": spec.processes,
        "worker_pids": [p.pid for p in procs],
        "metrics_port": metrics_port,
        "label": label,
    }
    _write_json(results / "meta.json", {**info, "spec": spec.public()})
    ready(info)
    hard_cap = end + 2 * spec.timeout + 5
    signal.alarm(
        math.ceil(hard_cap - time.time() + METRICS_LINGER) + 15
    )  # backstop if this loop ever hangs
    while not stop.is_set() and time.time() < hard_cap and any(p.is_alive() for p in procs):
        stop.wait(0.1)
    status = "stopped" if stop.is_set() else "capped" if time.time() >= hard_cap else "completed"
    _stop_workers(procs)
    errors = [p.read_text() for p in sorted(results.glob("worker-*.error"))]
    _write_json(
        results / "done.json",
        {"status": "failed" if errors else status, "ended_at": time.time(), "errors": errors},
    )
    if server is not None:
        stop.wait(METRICS_LINGER)  # let Prometheus scrape the final counts
        server.shutdown()


if __name__ == "__main__":
    serve(work)
