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

from chaos_ext._core.percentile import LatencyRecorder
from chaos_ext.dns._search import NEXT_ON
from chaos_ext.dns._wire import OUTCOMES

__all__ = ["FloodPlan", "FloodTally", "summarize"]


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


class FloodTally:
    """Schedule and outcome accounting for one flood. ``wires[name][candidate]``."""

    def __init__(self, plan: FloodPlan, wires: list[list[bytes]], start: float) -> None:
        self.plan = plan
        self.wires = wires
        self.start = start
        self.inflight: dict[int, tuple[float, int, int]] = {}
        self.expiry: deque[tuple[float, int]] = deque()
        self.followups: deque[tuple[int, int]] = deque()
        self.counts = dict.fromkeys((*OUTCOMES, "error"), 0)
        self.latency = LatencyRecorder()
        self.sent = 0
        self.late = 0
        self.retried = 0
        self.send_blocked = 0  # sends refused by a full socket buffer: the server lags
        self.lookups = 0
        self.lookups_answered = 0
        self.lookups_failed = 0
        self.finished_queries = 0  # queries of lookups that answered or failed
        self.last_send = start
        self.last_answer = start
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
        self.last_answer = now
        self.latency.add(now - sent_at)
        self.counts[outcome] += 1
        if outcome in NEXT_ON and candidate + 1 < len(self.wires[name]):
            self.followups.append((name, candidate + 1))
            return True
        self.finished_queries += candidate + 1
        if outcome == "answer":
            self.lookups_answered += 1
        else:
            self.lookups_failed += 1
        return True

    def failed(self, key: int, outcome: str) -> None:
        """A query that got no response (timeout, connection error): its lookup fails."""
        item = self.inflight.pop(key, None)
        if item is not None:
            self.counts[outcome] += 1
            self.lookups_failed += 1
            self.finished_queries += item[2] + 1

    def send_failed(self, candidate: int, now: float) -> None:
        """A query the kernel refused to send (e.g. EPERM from a firewall's drop).

        It used its slot in the schedule (otherwise the loop would retry at
        once, far above the rate) and its lookup ends here, failed.
        """
        self.sent += 1
        self.last_send = now
        self.counts["error"] += 1
        self.lookups_failed += 1
        self.finished_queries += candidate

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

    def tally(self, elapsed: float) -> dict[str, Any]:
        """Raw totals (JSON-friendly) for :func:`summarize`, also across processes."""
        return {
            "counts": dict(self.counts),
            "sent": self.sent,
            "late": self.late,
            "retried": self.retried,
            "lookups": self.lookups,
            "send_blocked": self.send_blocked,
            "lookups_answered": self.lookups_answered,
            "lookups_failed": self.lookups_failed,
            "finished_queries": self.finished_queries,
            # n sends at rate r are spread over n / r seconds: the first at 0, the last at (n-1)/r
            "send_window": self.last_send - self.start + 1 / self.plan.qps,
            "elapsed": elapsed,
            "latency": self.latency.encode(),
            # from the start to the last send or answer, whichever is later: the final
            # wait for queries that never come back is not load and is not counted
            "active": max(self.last_send + 1 / self.plan.qps, self.last_answer) - self.start,
        }

    def report(self, elapsed: float) -> dict[str, Any]:
        return summarize([self.tally(elapsed)])


def summarize(tallies: list[dict[str, Any]]) -> dict[str, Any]:
    """One flood report from the tallies of its workers (one or more processes)."""
    counts = {key: sum(t["counts"][key] for t in tallies) for key in tallies[0]["counts"]}
    keys = (
        "sent",
        "late",
        "retried",
        "lookups",
        "lookups_answered",
        "lookups_failed",
        "finished_queries",
        "send_blocked",
    )
    total = {key: sum(t[key] for t in tallies) for key in keys}
    latency = LatencyRecorder()
    for t in tallies:
        latency.merge(LatencyRecorder.decode(t["latency"]))
    elapsed = max(*(t["elapsed"] for t in tallies), 1e-9)
    active = max(*(t["active"] for t in tallies), 1e-9)
    finished = total["lookups_answered"] + total["lookups_failed"]
    responses = sum(counts[o] for o in OUTCOMES if o != "timeout")
    return {
        "queries_sent": total["sent"],
        "responses": responses,
        "elapsed_seconds": round(elapsed, 3),
        "sent_qps": round(sum(t["sent"] / max(t["send_window"], 1e-9) for t in tallies), 1),
        "achieved_qps": round(responses / active, 1),
        **counts,
        "late_responses": total["late"],
        "retried": total["retried"],
        "send_blocked": total["send_blocked"],
        "lookups": total["lookups"],
        "lookups_answered": total["lookups_answered"],
        "lookups_failed": total["lookups_failed"],
        "lookups_unfinished": total["lookups"]
        - total["lookups_answered"]
        - total["lookups_failed"],
        # the amplification: queries per lookup that ran to its end (answer or failure)
        "queries_per_lookup": round(total["finished_queries"] / max(finished, 1), 3),
        "workers": len(tallies),
        **latency.summary_ms(),
        **_connections(tallies),
    }


def _connections(tallies: list[dict[str, Any]]) -> dict[str, int]:
    opened = [t["connections_opened"] for t in tallies if "connections_opened" in t]
    return {"connections_opened": sum(opened)} if opened else {}
