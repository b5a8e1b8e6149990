"""One load worker process: an open-loop scheduler on an asyncio (uvloop) loop.

The scheduler walks this worker's share of the arrival times and sends each
request at its due time, never waiting for earlier responses. Latency is
measured from the scheduled time (no coordinated omission); how late the
scheduler itself was is kept as ``max_lag_ms`` (a starved generator shows).

Concurrency cap: a worker has at most its share of ``concurrency_limit``
requests in flight (one per connection). An arrival that finds them all busy
waits in a FIFO backlog for a free connection, like a client's pool: its
wait counts in its latency, since latency runs from the scheduled time. One
that has not got a connection within ``timeout`` is counted as ``dropped``
(overload) and never sent. So a slow server never slows the schedule down,
and a short stall of the generator itself (a busy machine) does not turn
into false drops.

A worker that starts (or stalls) so late that an arrival is already older
than ``timeout`` counts it as dropped instead of sending a burst of stale
requests: a pod of a Job that starts after the common start drops what it
missed. Shards (pods) take every ``shard_count``-th arrival, and the workers
of a shard every ``processes``-th of those.

Bounds: the schedule is finite (the profile's duration), the backlog is
bounded in time (``timeout``) and size, requests in flight have the spec's
timeout, ``SIGALRM`` kills the worker past its hard cap, and the kernel sends
it SIGTERM if its coordinator dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import math
import signal
import time
from collections import deque
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import IO, Any

from chaos_ext.load._bucket import BucketAccumulator
from chaos_ext.load._clients import Client, make_client
from chaos_ext.load.schedule import arrival_offsets
from chaos_ext.load.spec import LoadSpec

__all__ = ["Handshake", "WorkerPlan", "run_worker"]

_PR_SET_PDEATHSIG = 1
_YIELD_EVERY = 64  # launch at most this many due requests before letting responses in
_MAX_BACKLOG = 100_000  # arrivals waiting for a connection, per worker
_HANDSHAKE_TIMEOUT = 30.0


class Handshake:
    """Coordinator <-> workers: each worker reports ready (or its error), then all go at once.

    Built by the coordinator before forking (fork-inherited multiprocessing objects).
    """

    def __init__(self, ctx: Any) -> None:
        self.reports = ctx.Queue()  # (index, None | error text)
        self.go = ctx.Event()
        self.start = ctx.Value("d", 0.0)

    def report(self, index: int, error: str | None) -> None:
        self.reports.put((index, error))

    def wait_go(self, timeout: float) -> float:
        """Block until the coordinator says go; the common start (unix time)."""
        if not self.go.wait(timeout):
            raise TimeoutError("the coordinator never said go")
        return float(self.start.value)


class WorkerPlan:
    """Worker ``index`` of ``count`` for ``spec``; ``start`` (unix time) is set at go."""

    def __init__(self, spec: LoadSpec, index: int, count: int, out: Path) -> None:
        self.spec, self.index, self.count, self.out = spec, index, count, out
        self.start = 0.0
        share, extra = divmod(spec.concurrency_limit, count)
        self.cap = max(1, share + (1 if index < extra else 0))

    @property
    def hard_cap(self) -> float:
        """Seconds from now after which the worker must be gone, whatever happens."""
        wait = 2 * self.spec.timeout  # backlog wait, then the request itself
        return max(0.0, self.start - time.time()) + self.spec.duration + wait + 10


class _Worker:
    def __init__(self, plan: WorkerPlan, sink: IO[str]) -> None:
        self.plan, self.sink = plan, sink
        self.base = 0.0  # monotonic time of the plan's start, set by begin()
        self.buckets: dict[int, BucketAccumulator] = {}
        self.inflight = 0
        self.backlog: deque[tuple[int, BucketAccumulator, float]] = deque()
        self.idle = asyncio.Event()
        self.client: Client = make_client(plan.spec, plan.cap, self.done)

    def begin(self, start: float) -> None:
        self.plan.start = start
        self.base = time.monotonic() + (start - time.time())

    def bucket(self, offset: float) -> BucketAccumulator:
        seconds = self.plan.spec.bucket_seconds
        index = int(offset // seconds)
        found = self.buckets.get(index)
        if found is None:
            start = self.plan.start + index * seconds
            found = self.buckets[index] = BucketAccumulator(index, start, seconds, self.plan.index)
        return found

    async def schedule(self) -> None:
        count = len(self.plan.spec.urls)
        burst = 0
        spec = self.plan.spec
        first = spec.shard_index + self.plan.index * spec.shard_count
        for k, offset in arrival_offsets(
            spec.segments, first=first, step=self.plan.count * spec.shard_count
        ):
            due = self.base + offset
            now = time.monotonic()
            if now - due > spec.timeout:  # missed by longer than an arrival may wait: dropped
                missed = self.bucket(offset)
                missed.pending += 1
                self.drop(missed)
                continue
            if due > now:
                await asyncio.sleep(due - now)
                now, burst = time.monotonic(), 0
            elif burst >= _YIELD_EVERY:
                await asyncio.sleep(0)  # a backlog of due arrivals: let responses in too
                now, burst = time.monotonic(), 0
            burst += 1
            self.arrive(k % count, self.bucket(offset), due, now)

    def arrive(self, url_index: int, bucket: BucketAccumulator, due: float, now: float) -> None:
        bucket.pending += 1
        bucket.max_lag = max(bucket.max_lag, now - due)
        if self.inflight < self.plan.cap and not self.backlog:
            self.send(url_index, bucket, due)
        elif len(self.backlog) < _MAX_BACKLOG:
            self.backlog.append((url_index, bucket, due))
        else:
            self.drop(bucket)

    def send(self, url_index: int, bucket: BucketAccumulator, due: float) -> None:
        bucket.sent += 1
        self.inflight += 1
        self.idle.clear()
        self.client.launch(url_index, (bucket, due))

    def drop(self, bucket: BucketAccumulator) -> None:
        bucket.dropped += 1
        bucket.pending -= 1

    def expire(self, now: float) -> None:
        """Drop the backlog's arrivals that waited longer than the timeout."""
        limit = now - self.plan.spec.timeout
        while self.backlog and self.backlog[0][2] < limit:
            self.drop(self.backlog.popleft()[1])

    def done(
        self,
        context: tuple[BucketAccumulator, float],
        sent_at: float,
        ended_at: float,
        status: int | None,
        kind: str | None,
    ) -> None:
        bucket, due = context
        now = time.monotonic()
        if status is not None:
            bucket.response(status, ended_at - due, ended_at - sent_at, kind)
        else:
            bucket.error(kind or "other")
        bucket.pending -= 1
        bucket.last_done = now - self.base
        self.bucket(now - self.base).answered += 1
        self.inflight -= 1
        if self.backlog:
            self.expire(now)
            if self.backlog:
                url_index, waiting, waited_due = self.backlog.popleft()
                self.send(url_index, waiting, waited_due)
        if not self.inflight:
            self.idle.set()

    def flush(self, *, everything: bool = False) -> None:
        """Write finished buckets (all of them when ``everything``), oldest first."""
        now = time.monotonic() - self.base
        seconds = self.plan.spec.bucket_seconds
        current = math.floor(now / seconds)
        grace = 2 * self.plan.spec.timeout + 1  # a backlog wait, then the request itself
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
            self.expire(time.monotonic())
            self.flush()

    async def drain(self, timeout: float) -> None:
        """Wait for the requests in flight (at most ``timeout``), then drop the rest."""
        deadline = time.monotonic() + timeout
        while (self.inflight or self.backlog) and time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.idle.wait(), max(0.0, deadline - time.monotonic()))
            self.expire(time.monotonic())
        self.backlog.clear()
        self.client.abort()


async def _run(plan: WorkerPlan, handshake: Handshake) -> None:
    loop = asyncio.get_running_loop()
    with plan.out.open("a") as sink:
        try:
            worker = _Worker(plan, sink)
        except Exception as exc:
            handshake.report(plan.index, f"{type(exc).__name__}: {exc}")
            raise
        handshake.report(plan.index, None)
        worker.begin(handshake.wait_go(_HANDSHAKE_TIMEOUT))  # blocks: nothing runs yet
        signal.alarm(math.ceil(plan.hard_cap))
        await asyncio.sleep(max(0.0, worker.base - time.monotonic()))
        scheduler = loop.create_task(worker.schedule())
        stopped = False

        def stop() -> None:
            nonlocal stopped
            stopped = True
            scheduler.cancel()
            worker.backlog.clear()
            worker.client.abort()

        loop.add_signal_handler(signal.SIGTERM, stop)
        flusher = loop.create_task(worker.flush_loop())
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await scheduler
            await worker.drain(0.0 if stopped else 2 * plan.spec.timeout + 0.5)
        finally:
            flusher.cancel()
            worker.flush(everything=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(worker.client.close(), 2)


def _loop_runner() -> Callable[[Coroutine[Any, Any, None]], None]:
    """uvloop's runner when installed (about twice as fast here), else asyncio's."""
    try:
        import uvloop  # noqa: PLC0415 - optional accelerator
    except ImportError:
        return asyncio.run
    return uvloop.run


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def run_worker(
    spec_payload: dict[str, Any], index: int, count: int, out: str, handshake: Handshake
) -> None:
    """Process entry point (forked by the coordinator)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent()
    plan = WorkerPlan(LoadSpec.from_payload(spec_payload), index, count, Path(out))
    signal.alarm(math.ceil(_HANDSHAKE_TIMEOUT) + 5)  # then the plan's own cap, once it starts
    try:
        _loop_runner()(_run(plan, handshake))
    except Exception as exc:
        # the coordinator reports it in done.json (stderr goes nowhere)
        plan.out.with_suffix(".error").write_text(f"{type(exc).__name__}: {exc}")
        raise
