"""A flood split over several helper processes (``workers`` > 1), and the worker itself.

One Python thread sends and receives some tens of thousands of queries a
second; on a busy machine several processes keep up with a C load generator
(dnsperf runs a send and a receive thread per client). Each worker is a
helper process (:mod:`chaos_ext._core.helper`) tagged with the flood's ledger
entry id, so a killed runner's workers are stopped by ``gameday rollback``;
each also stops by itself at the flood's caps.

Protocol: the parent starts every worker (payload: its share of the plan,
the queries, a work directory); each reports ready, then waits for the
``go`` file so that all start together; each writes its tally to
``result-<n>.json`` and exits. The parent merges the tallies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chaos_ext._core import helper as _helper
from chaos_ext._core import procfs as _procfs
from chaos_ext._core.failpoint import failpoint
from chaos_ext._core.percentile import prepare_folding
from chaos_ext.dns._flood import flood_tally
from chaos_ext.dns._tally import FloodPlan, summarize
from chaos_ext.dns.errors import DnsError
from chaos_ext.errors import ChaosExtError

__all__ = ["run_parallel", "split_plan", "work"]

_MODULE = "chaos_ext.dns._flood_workers"
_GO_WAIT = 30.0
_EXIT_GRACE = 10.0


def split_plan(plan: FloodPlan, workers: int) -> list[FloodPlan]:
    """``workers`` shares of ``plan``: rate, count, concurrency and sockets divided."""
    shares = []
    for index in range(workers):
        count = plan.max_queries // workers + (1 if index < plan.max_queries % workers else 0)
        shares.append(
            dataclasses.replace(
                plan,
                qps=plan.qps / workers,
                max_queries=max(count, 1),
                concurrency=max(plan.concurrency // workers, 1),
                sockets=max(plan.sockets // workers, 1),
            )
        )
    return shares


def run_parallel(
    plan: FloodPlan, wires: list[list[bytes]], workers: int, token: str
) -> dict[str, Any]:
    """Run the flood in ``workers`` helper processes tagged ``token``; merge their tallies."""
    workdir = Path(tempfile.mkdtemp(prefix="gameday-flood-"))
    try:
        pids = []
        encoded = [[wire.hex() for wire in chain] for chain in wires]
        for index, share in enumerate(split_plan(plan, workers)):
            payload = {
                "plan": dataclasses.asdict(share),
                "wires": encoded,
                "workdir": str(workdir),
                "index": index,
            }
            try:
                handle = _helper.start_helper(
                    module=_MODULE, payload=payload, token=token, ready_timeout=30
                )
            except ChaosExtError as exc:
                raise DnsError(f"flood worker {index} did not start: {exc}") from exc
            pids.append(handle.pid)
        (workdir / "go").touch()
        failpoint("dns-flood.mid-apply")  # the workers are flooding (the crash matrix's window)
        tallies = _collect(workdir, pids, plan.duration + plan.timeout + _EXIT_GRACE)
    finally:
        _helper.stop_helpers(token)
        shutil.rmtree(workdir, ignore_errors=True)
    return summarize(tallies)


def _collect(workdir: Path, pids: list[int], limit: float) -> list[dict[str, Any]]:
    results = [workdir / f"result-{index}.json" for index in range(len(pids))]
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if all(path.exists() for path in results) or not any(map(_procfs.process, pids)):
            break
        time.sleep(0.05)
    for pid in pids:  # our children: reap them (stop_helpers kills any still running)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    tallies = []
    for index, path in enumerate(results):
        try:
            tally = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise DnsError(f"flood worker {index} left no result: {exc}") from exc
        if "error" in tally:
            raise DnsError(f"flood worker {index} failed: {tally['error']}")
        tallies.append(tally)
    return tallies


def _wait_for_go(workdir: Path, stop: threading.Event) -> bool:
    deadline = time.monotonic() + _GO_WAIT
    while not (workdir / "go").exists():
        if stop.is_set() or time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def work(
    payload: dict[str, Any], ready: Callable[[dict[str, Any]], None], stop: threading.Event
) -> None:
    """Worker side: build, report ready, wait for ``go``, flood, write the tally."""
    plan = FloodPlan(**payload["plan"])
    wires = [[bytes.fromhex(wire) for wire in chain] for chain in payload["wires"]]
    workdir = Path(payload["workdir"])
    prepare_folding()  # before ready: every worker starts flooding at "go", none importing
    ready({"worker": payload["index"]})
    if not _wait_for_go(workdir, stop):
        return
    try:
        tally = flood_tally(plan, wires, stop)
    except Exception as exc:  # noqa: BLE001 - reported to the parent through the result file
        tally = {"error": f"{type(exc).__name__}: {exc}"}
    partial = workdir / f".result-{payload['index']}.json"
    with contextlib.suppress(OSError):  # the parent may have given up and removed workdir
        partial.write_text(json.dumps(tally))
        partial.rename(workdir / f"result-{payload['index']}.json")


if __name__ == "__main__":
    _helper.serve(work)
