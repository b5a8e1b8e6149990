"""One load worker process: an open-loop scheduler on an asyncio (uvloop) loop.

The scheduler walks this worker's share of the arrival times and launches
each request at its due time, never waiting for earlier responses. When the
worker already has its share of ``concurrency_limit`` requests in flight the
arrival is counted as ``dropped`` instead of delaying the schedule. Latency is
measured from the scheduled time (no coordinated omission), and the delay
between the scheduled and the actual send is kept as ``max_lag_ms`` so a
generator that cannot keep up is visible.

Bounds: the schedule is finite (the profile's duration), in-flight requests
have the spec's timeout, ``SIGALRM`` kills the worker past its hard cap, and
the kernel sends it SIGTERM if its coordinator dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import math
import signal
import time
from pathlib import Path
from typing import IO, Any

from chaos_ext.load._clients import Client, classify, make_client
from chaos_ext.load.results import BucketAccumulator
from chaos_ext.load.schedule import arrival_offsets
from chaos_ext.load.spec import LoadSpec

__all__ = ["WorkerPlan", "run_worker"]

_PR_SET_PDEATHSIG = 1
_YIELD_EVERY = 64  # launch at most this many due requests before letting responses in


class WorkerPlan:
    """Worker ``index`` of ``count`` for ``spec``, starting at ``start`` (unix time)."""

    def __init__(self, spec: LoadSpec, index: int, count: int, start: float, out: Path) -> None:
        self.spec, self.index, self.count, self.start, self.out = spec, index, count, start, out
        share, extra = divmod(spec.concurrency_limit, count)
        self.cap = max(1, share + (1 if index < extra else 0))

    @property
    def hard_cap(self) -> float:
        """Seconds from now after which the worker must be gone, whatever happens."""
        return max(0.0, self.start - time.time()) + self.spec.duration + self.spec.timeout + 10


class _Worker:
    def __init__(self, plan: WorkerPlan, client: Client, sink: IO[str]) -> None:
        self.plan, self.client, self.sink = plan, client, sink
        self.loop = asyncio.get_running_loop()
        self.base = time.monotonic() + (plan.start - time.time())
        self.buckets: dict[int, BucketAccumulator] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.inflight = 0

    def bucket(self, offset: float) -> BucketAccumulator:
        seconds = self.plan.spec.bucket_seconds
        index = int(offset // seconds)
        found = self.buckets.get(index)
        if found is None:
            start = self.plan.start + index * seconds
            found = self.buckets[index] = BucketAccumulator(index, start, seconds, self.plan.index)
        return found

    async def schedule(self) -> None:
        urls = self.plan.spec.urls
        burst = 0
        for k, offset in arrival_offsets(
            self.plan.spec.segments, first=self.plan.index, step=self.plan.count
        ):
            due = self.base + offset
            now = time.monotonic()
            if due > now:
                await asyncio.sleep(due - now)
                now, burst = time.monotonic(), 0
            elif burst >= _YIELD_EVERY:
                await asyncio.sleep(0)
                now, burst = time.monotonic(), 0
            burst += 1
            self.launch(urls[k % len(urls)], offset, due, now)

    def launch(self, url: str, offset: float, due: float, now: float) -> None:
        bucket = self.bucket(offset)
        if self.inflight >= self.plan.cap:
            bucket.dropped += 1
            return
        bucket.sent += 1
        bucket.pending += 1
        bucket.max_lag = max(bucket.max_lag, now - due)
        self.inflight += 1
        task = self.loop.create_task(self.one(url, due, bucket))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def one(self, url: str, due: float, bucket: BucketAccumulator) -> None:
        sent = time.monotonic()
        try:
            status = await self.client.fetch(url)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is classified and counted
            bucket.error(classify(exc))
        else:
            done = time.monotonic()
            bucket.response(status, done - due, done - sent)
        finally:
            self.inflight -= 1
            bucket.pending -= 1

    def flush(self, *, everything: bool = False) -> None:
        """Write finished buckets (all of them when ``everything``), oldest first."""
        now = time.monotonic() - self.base
        seconds = self.plan.spec.bucket_seconds
        current = math.floor(now / seconds)
        grace = self.plan.spec.timeout + 1
        for index in sorted(self.buckets):
            bucket = self.buckets[index]
            ended = index < current
            overdue = now > (index + 1) * seconds + grace
            if not (everything or (ended and (bucket.pending == 0 or overdue))):
                break
            self.sink.write(json.dumps(bucket.to_line(), separators=(",", ":")) + "\n")
            del self.buckets[index]
        self.sink.flush()

    async def flush_loop(self) -> None:
        while True:
            await asyncio.sleep(0.2)
            self.flush()

    async def drain(self, timeout: float) -> None:
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=timeout)
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=1)


async def _run(plan: WorkerPlan) -> None:
    loop = asyncio.get_running_loop()
    with plan.out.open("a") as sink:
        client = make_client(plan.spec, plan.cap)
        worker = _Worker(plan, client, sink)
        await asyncio.sleep(max(0.0, worker.base - time.monotonic()))
        scheduler = loop.create_task(worker.schedule())
        stopped = False

        def stop() -> None:
            nonlocal stopped
            stopped = True
            scheduler.cancel()
            for task in list(worker.tasks):
                task.cancel()

        loop.add_signal_handler(signal.SIGTERM, stop)
        flusher = loop.create_task(worker.flush_loop())
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await scheduler
            await worker.drain(0.0 if stopped else plan.spec.timeout + 0.5)
        finally:
            flusher.cancel()
            worker.flush(everything=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 2)


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def run_worker(
    spec_payload: dict[str, Any], index: int, count: int, start: float, out: str
) -> None:
    """Process entry point (forked by the coordinator)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent()
    plan = WorkerPlan(LoadSpec.from_payload(spec_payload), index, count, start, Path(out))
    signal.alarm(math.ceil(plan.hard_cap))
    try:
        import uvloop  # noqa: PLC0415 - optional accelerator
    except ImportError:
        asyncio.run(_run(plan))
    else:
        uvloop.run(_run(plan))
