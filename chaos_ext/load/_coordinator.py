"""The load helper process: forks the workers, serves /metrics, holds until done.

Run by :func:`chaos_ext._helper.start_helper` as ``python -m
chaos_ext.load._coordinator`` with ``{"spec": ..., "results_dir": ...}`` on
stdin. It forks ``spec.processes`` workers that share one schedule (worker i
takes every i-th arrival), all starting at the same wall-clock instant, and
writes ``meta.json`` (when, what; no headers or body) and, at the end,
``done.json`` (``completed``, ``stopped`` or ``capped``).

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
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chaos_ext._helper import serve
from chaos_ext.load._engine import run_worker
from chaos_ext.load.spec import LoadSpec

__all__ = ["work"]

METRICS_LINGER = 15.0  # seconds /metrics stays up after the load ends (unless stopped)
_START_LEAD = 0.4  # seconds between forking and the first arrival: workers import nothing


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def _start_workers(
    spec: LoadSpec, payload: dict[str, Any], start: float, results: Path
) -> list[multiprocessing.process.BaseProcess]:
    ctx = multiprocessing.get_context("fork")
    procs: list[multiprocessing.process.BaseProcess] = []
    for index in range(spec.processes):
        out = str(results / f"worker-{index}.jsonl")
        proc = ctx.Process(
            target=run_worker,
            args=(payload["spec"], index, spec.processes, start, out),
            name=f"gameday-load-{index}",
        )
        proc.start()
        procs.append(proc)
    return procs


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
    start = time.time() + _START_LEAD
    end = start + spec.duration
    procs = _start_workers(spec, payload, start, results)
    server, metrics_port = None, 0
    if spec.metrics_port:
        from chaos_ext.load._metrics import serve_metrics  # noqa: PLC0415 - only when asked

        server, metrics_port = serve_metrics(
            spec, results, label, start, spec.metrics_port, spec.metrics_addr
        )
    info = {
        "pid": os.getpid(), "start": start, "end": end, "processes": spec.processes,
        "worker_pids": [p.pid for p in procs], "metrics_port": metrics_port, "label": label,
    }  # fmt: skip
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
    _write_json(results / "done.json", {"status": status, "ended_at": time.time()})
    if server is not None:
        stop.wait(METRICS_LINGER)  # let Prometheus scrape the final counts
        server.shutdown()


if __name__ == "__main__":
    serve(work)
