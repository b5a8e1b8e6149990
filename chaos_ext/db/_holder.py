"""Helper process: open database connections concurrently, report, then hold them.

Started by :func:`chaos_ext.db.actions.exhaust_connections` through
:func:`chaos_ext._core.helper.start_helper`, tagged with the ledger entry id, with
the credentials in its stdin payload (never argv or the environment). It

1. opens one connection (a failure here is the one-line error sent back:
   nothing is held) and reads the server's capacity over it;
2. opens the rest with ``open_concurrency`` threads until the target, the
   server's first refusal, or the opening budget, whichever comes first; a
   refusal for lack of slots met while other attempts were in flight is
   confirmed by opening one at a time (see :func:`confirm_refusal`);
3. reports (the ready line) and holds them, optionally running ``SELECT 1``
   on each every ``keepalive_seconds`` and opening more every
   ``refill_seconds`` (slots others freed, up to the target), until SIGTERM
   or ``hold_seconds`` (its own hard cap), then closes them all.

A SIGKILL of this process closes its sockets too: the server drops the
connections as soon as it notices the peer is gone.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chaos_ext._core.helper import serve
from chaos_ext.db._engines import (
    ConnectFailure,
    ConnectParams,
    capacity,
    close,
    connect,
    ping,
    standing_capacity,
)
from chaos_ext.db._target import Capacity, Target, max_ceiling, parse_target, planned_total

__all__ = ["Holding", "Opening", "confirm_refusal", "open_many", "work"]

Ready = Callable[[dict[str, Any]], None]


@dataclass
class Opening:
    """What the opening phase achieved."""

    conns: list[Any] = field(default_factory=list)
    failure: ConnectFailure | None = None
    failures: int = 0
    out_of_time: bool = False
    burst_refused_at: int | None = None


def open_many(
    params: ConnectParams, count: int, concurrency: int, deadline: float, stop: threading.Event
) -> Opening:
    """Open up to ``count`` connections with ``concurrency`` threads.

    No new attempt starts after the first failure (the refusal point), after
    ``deadline`` (monotonic) or once ``stop`` is set; attempts already in
    flight finish (each bounded by the connect timeout).
    """
    result = Opening()
    lock = threading.Lock()
    halt = threading.Event()
    claimed = 0

    def claim() -> bool:
        nonlocal claimed
        with lock:
            if halt.is_set() or stop.is_set() or claimed >= count:
                return False
            if time.monotonic() > deadline:
                result.out_of_time = True
                return False
            claimed += 1
            return True

    def worker() -> None:
        while claim():
            try:
                conn = connect(params)
            except ConnectFailure as failure:
                with lock:
                    result.failures += 1
                    result.failure = result.failure or failure
                halt.set()
                continue
            with lock:
                result.conns.append(conn)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(concurrency, count))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return result


def confirm_refusal(
    params: ConnectParams,
    opening: Opening,
    count: int,
    concurrency: int,
    deadline: float,
    stop: threading.Event,
) -> Opening:
    """Check a burst's refusal for lack of slots with lone attempts.

    A server can refuse a connection for lack of slots while others are still
    in their handshake even though a slot is free: MariaDB/MySQL count a
    connection from accept, so two handshakes racing for the last slot can
    both be refused. When the burst (``concurrency`` > 1) stopped at such a
    refusal short of ``count``, open the rest one at a time until a lone
    attempt is refused too: that is the server's real capacity, and
    ``burst_refused_at`` keeps where the burst stopped (counting the first
    connection, as ``opened`` does).
    """
    failure = opening.failure
    if concurrency <= 1 or failure is None or not failure.limit or stop.is_set():
        return opening
    missing = count - len(opening.conns)
    if missing <= 0:
        return opening
    lone = open_many(params, missing, 1, deadline, stop)
    return Opening(
        conns=opening.conns + lone.conns,
        failure=lone.failure,
        failures=opening.failures + lone.failures,
        out_of_time=lone.out_of_time,
        burst_refused_at=1 + len(opening.conns),
    )


def _stopped_by(opening: Opening, total: int | None, opened: int) -> str:
    if opening.failure is not None:
        return "limit" if opening.failure.limit else "error"
    if opening.out_of_time:
        return "deadline"
    if total is None:
        return "ceiling"
    return "target" if opened >= total else "stopped"


def _report(
    target: Target, before: Capacity, after: Capacity | None, opening: Opening, seconds: float
) -> dict[str, Any]:
    total = planned_total(target, before)
    opened = 1 + len(opening.conns)
    stopped_by = _stopped_by(opening, total, opened)
    failure = opening.failure
    return {
        "target": str(target),
        "target_count": total,
        "opened": opened,
        "reached_target": stopped_by == "target" or (total is None and stopped_by == "limit"),
        "stopped_by": stopped_by,
        "refused": stopped_by in ("limit", "error"),
        "refused_at": opened if stopped_by in ("limit", "error") else None,
        "refusals": opening.failures,
        "burst_refused_at": opening.burst_refused_at,
        "error_text": failure.server_text if failure else None,
        "error_kind": failure.kind if failure else None,
        "max_connections": before.max_connections,
        "reserved_connections": before.reserved,
        "in_use_before": before.in_use - 1,
        "in_use_after": after.in_use if after else None,
        "free_after": after.usable_free if after else None,
        "seconds_to_target": round(seconds, 4),
        "helper_pid": os.getpid(),
    }


@dataclass(frozen=True)
class Holding:
    """How to hold: for how long, how often to ping, how often to take freed slots back."""

    seconds: float
    keepalive: float
    refill: float
    wanted: int


def _ping_all(conns: list[Any], engine: str) -> None:
    for conn in list(conns):
        try:
            ping(conn, engine)
        except Exception:  # noqa: BLE001 - a dropped connection is simply no longer held
            conns.remove(conn)
            close(conn)


def _hold(conns: list[Any], params: ConnectParams, how: Holding, stop: threading.Event) -> None:
    end = time.monotonic() + how.seconds
    next_ping = next_refill = time.monotonic()
    while (left := end - time.monotonic()) > 0:
        now = time.monotonic()
        due = [t for t, on in ((next_ping, how.keepalive), (next_refill, how.refill)) if on > 0]
        if stop.wait(min(left, *(max(0.0, t - now) for t in due)) if due else left):
            return
        now = time.monotonic()
        if how.keepalive > 0 and now >= next_ping:
            _ping_all(conns, params.engine)
            next_ping = now + how.keepalive
        if how.refill > 0 and now >= next_refill:
            missing = how.wanted - len(conns)
            if missing > 0:
                conns += open_many(params, missing, min(8, missing), now + 5, stop).conns
            next_refill = time.monotonic() + how.refill


def work(payload: dict[str, Any], ready: Ready, stop: threading.Event) -> None:
    """The helper's body (see the module docstring)."""
    params = ConnectParams(**payload["connect"])
    target = parse_target(payload["target"])
    started = time.monotonic()
    deadline = started + float(payload["open_budget"])
    try:
        first = connect(params)
    except ConnectFailure as failure:
        ready({"error": failure.message})
        return
    conns = [first]
    try:
        before = standing_capacity(first, params.engine)  # per-request clients not counted
        total = planned_total(target, before)
        count = (total if total is not None else max_ceiling(before)) - 1
        concurrency = int(payload["open_concurrency"])
        opening = open_many(params, count, concurrency, deadline, stop)
        opening = confirm_refusal(params, opening, count, concurrency, deadline, stop)
        conns += opening.conns
        seconds = time.monotonic() - started
        if stop.is_set():
            ready({"error": "stopped while opening connections"})
            return
        try:
            after: Capacity | None = capacity(first, params.engine)
        except Exception:  # noqa: BLE001 - the report just lacks the after-count
            after = None
        ready(_report(target, before, after, opening, seconds))
        how = Holding(
            seconds=float(payload["hold_seconds"]),
            keepalive=float(payload["keepalive_seconds"]),
            refill=float(payload.get("refill_seconds", 0.0)),
            wanted=count + 1,
        )
        _hold(conns, params, how, stop)
    finally:
        for conn in conns:
            close(conn)


if __name__ == "__main__":
    serve(work)
