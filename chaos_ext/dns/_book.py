"""Bookkeeping of a query flood: schedule, in-flight queries, lookups, outcomes.

Transport-independent (UDP and TCP loops share it) and free of I/O, so the
rate schedule and the stub-resolver chains are tested without a network.

A *lookup* is what an application asks for (one name); with a search list
it becomes a chain of *queries* (see ``_search``): the next candidate is
queued when the previous one comes back NXDOMAIN/NODATA/SERVFAIL. Queued
follow-ups go out before new lookups start, and every query counts against
the rate, so the target rate is the packet rate the resolver sees.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Literal

from chaos_ext.dns._search import NEXT_ON
from chaos_ext.dns._stats import LatencyHistogram
from chaos_ext.dns._wire import OUTCOMES

__all__ = ["Book", "FloodPlan"]


@dataclass(frozen=True)
class FloodPlan:
    """A validated flood: where, how fast, how long, what to ask."""

    server: str
    port: int
    qps: float
    duration: float
    max_queries: int
    protocol: Literal["udp", "tcp"]
    timeout: float
    concurrency: int
    sockets: int


class Book:
    """Schedule and outcome accounting for one flood. ``wires[name][candidate]``."""

    def __init__(self, plan: FloodPlan, wires: list[list[bytes]], start: float) -> None:
        self.plan = plan
        self.wires = wires
        self.start = start
        self.inflight: dict[int, tuple[float, int, int]] = {}
        self.expiry: deque[tuple[float, int]] = deque()
        self.followups: deque[tuple[int, int]] = deque()
        self.counts = dict.fromkeys((*OUTCOMES, "error"), 0)
        self.latency = LatencyHistogram()
        self.sent = 0
        self.late = 0
        self.retried = 0
        self.lookups = 0
        self.lookups_answered = 0
        self.lookups_failed = 0
        self.last_send = start
        self._next_name = 0

    def due(self, now: float) -> int:
        """How many queries may be sent now without passing the rate or count cap."""
        if now - self.start >= self.plan.duration:
            return 0
        allowed = min(int((now - self.start) * self.plan.qps) + 1, self.plan.max_queries)
        return allowed - self.sent

    def next_query(self) -> tuple[int, int]:
        """``(name, candidate)`` to send next: a queued follow-up, else a new lookup."""
        if self.followups:
            return self.followups.popleft()
        name = self._next_name
        self._next_name = (name + 1) % len(self.wires)
        self.lookups += 1
        return name, 0

    def sent_query(self, key: int, name: int, candidate: int, now: float) -> None:
        self.inflight[key] = (now, name, candidate)
        self.expiry.append((now, key))
        self.sent += 1
        self.last_send = now

    def unsent(self, name: int, candidate: int) -> None:
        """A query picked but not sent (socket busy): send it next."""
        self.followups.appendleft((name, candidate))

    def answered(self, key: int, outcome: str, now: float) -> bool:
        """Record a response; False if it is late (already timed out) or unknown."""
        item = self.inflight.pop(key, None)
        if item is None:
            self.late += 1
            return False
        sent_at, name, candidate = item
        self.latency.add(now - sent_at)
        self.counts[outcome] += 1
        if outcome in NEXT_ON and candidate + 1 < len(self.wires[name]):
            self.followups.append((name, candidate + 1))
        elif outcome == "answer":
            self.lookups_answered += 1
        else:
            self.lookups_failed += 1
        return True

    def failed(self, key: int, outcome: str) -> None:
        """A query that got no response (timeout, connection error): its lookup fails."""
        if self.inflight.pop(key, None) is not None:
            self.counts[outcome] += 1
            self.lookups_failed += 1

    def retry(self, key: int) -> None:
        """The server closed the connection under a query: ask it again on another one."""
        item = self.inflight.pop(key, None)
        if item is not None:
            self.retried += 1
            self.followups.appendleft((item[1], item[2]))

    def expire(self, now: float) -> list[int]:
        """Time out queries older than the timeout; returns their keys."""
        expired = []
        limit = now - self.plan.timeout
        while self.expiry and self.expiry[0][0] <= limit:
            sent_at, key = self.expiry.popleft()
            item = self.inflight.get(key)
            if item is not None and item[0] == sent_at:
                self.failed(key, "timeout")
                expired.append(key)
        return expired

    def finished(self, now: float) -> bool:
        """Sending is over and nothing is in flight (or what is left timed out)."""
        sending_over = now - self.start >= self.plan.duration or self.sent >= self.plan.max_queries
        return sending_over and (not self.inflight or now - self.last_send > self.plan.timeout)

    def report(self, elapsed: float) -> dict[str, Any]:
        responses = sum(self.counts[o] for o in OUTCOMES if o != "timeout")
        window = max(elapsed, 1e-9)
        # n sends at rate r are spread over n / r seconds: the first at 0, the last at (n-1)/r
        send_window = max(self.last_send - self.start + 1 / self.plan.qps, 1e-9)
        started = max(self.lookups, 1)
        return {
            "queries_sent": self.sent,
            "responses": responses,
            "elapsed_s": round(elapsed, 3),
            "sent_qps": round(self.sent / send_window, 1),
            "achieved_qps": round(responses / window, 1),
            **self.counts,
            "late_responses": self.late,
            "retried": self.retried,
            "lookups": self.lookups,
            "lookups_answered": self.lookups_answered,
            "lookups_failed": self.lookups_failed,
            "lookups_unfinished": self.lookups - self.lookups_answered - self.lookups_failed,
            "queries_per_lookup": round(self.sent / started, 3),
            **self.latency.summary(),
        }
