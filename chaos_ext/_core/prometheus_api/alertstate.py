"""Prometheus's pending/firing state machine for alerting rules, evaluated by us.

The same rules as Prometheus's rule manager (``rules/alerting.go``, ``Eval``):

* each series the expression returns is an alert instance, identified by its
  labels (minus ``__name__``) plus the rule's labels and ``alertname``;
* a new instance is *pending*, active since that evaluation; it turns *firing*
  at the first evaluation at least ``for`` after it became active (``for: 0``:
  at once);
* an instance the expression no longer returns is dropped when pending; when
  firing it is dropped too, unless ``keep_firing_for`` is set: then it keeps
  firing until ``keep_firing_for`` has passed since the first evaluation that
  missed it (and it is back to normal as soon as the expression returns it);
* an empty answer means "nothing pending", never "no data".

:meth:`RuleState.replay` feeds a range query's points as past evaluations, so
an alert that was already pending when the watch started fires when Prometheus
would fire it, not ``for`` later. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from chaos_ext._core.prometheus_api.results import Sample, Series
from chaos_ext._core.prometheus_api.rules import AlertRule

__all__ = ["ActiveAlert", "RuleState", "replay_times"]

_MAX_REPLAY_POINTS = 2000


def _iso(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")


@dataclass
class ActiveAlert:
    """One pending or firing instance of a rule."""

    labels: dict[str, str]
    active_at: float
    value: float
    fired_at: float | None = None
    keep_firing_since: float | None = None

    @property
    def state(self) -> str:
        return "pending" if self.fired_at is None else "firing"

    def as_dict(self) -> dict[str, Any]:
        return {
            "labels": self.labels,
            "state": self.state,
            "value": self.value,
            "active_at": _iso(self.active_at),
            "fired_at": _iso(self.fired_at),
            "active_at_unix": round(self.active_at, 3),
            "fired_at_unix": None if self.fired_at is None else round(self.fired_at, 3),
        }


@dataclass
class RuleState:
    """The active instances of one rule across evaluations."""

    rule: AlertRule
    active: dict[frozenset[tuple[str, str]], ActiveAlert] = field(default_factory=dict)
    evaluations: int = 0
    last_eval: float | None = None

    def _labels(self, sample: Sample) -> dict[str, str]:
        labels = {k: v for k, v in sample.labels.items() if k != "__name__"}
        return {**labels, **self.rule.labels, "alertname": self.rule.name}

    def evaluate(self, samples: Sequence[Sample], now: float) -> list[ActiveAlert]:
        """One evaluation at ``now``; returns the instances that started firing."""
        self.evaluations += 1
        self.last_eval = now
        seen: set[frozenset[tuple[str, str]]] = set()
        for sample in samples:
            labels = self._labels(sample)
            key = frozenset(labels.items())
            seen.add(key)
            alert = self.active.get(key)
            if alert is None:
                self.active[key] = ActiveAlert(labels, active_at=now, value=sample.value)
            else:
                alert.value = sample.value
                alert.keep_firing_since = None
        started: list[ActiveAlert] = []
        for key, alert in list(self.active.items()):
            if key not in seen and not self._keeps_firing(alert, now):
                del self.active[key]
                continue
            if alert.fired_at is None and now - alert.active_at >= self.rule.for_s:
                alert.fired_at = now
                started.append(alert)
        return started

    def _keeps_firing(self, alert: ActiveAlert, now: float) -> bool:
        if alert.fired_at is None or self.rule.keep_firing_for_s <= 0:
            return False
        if alert.keep_firing_since is None:
            alert.keep_firing_since = now
        return now - alert.keep_firing_since < self.rule.keep_firing_for_s

    def firing(self) -> list[ActiveAlert]:
        return [a for a in self.active.values() if a.fired_at is not None]

    def pending(self) -> list[ActiveAlert]:
        return [a for a in self.active.values() if a.fired_at is None]

    def replay(self, series: Sequence[Series], times: Sequence[float]) -> None:
        """Evaluate at each past time from a range query's answer (step-aligned times)."""
        by_time: dict[float, list[Sample]] = {round(t, 3): [] for t in times}
        for one in series:
            for at, value in one.points:
                slot = by_time.get(round(at, 3))
                if slot is not None:
                    slot.append(Sample(one.labels, value))
        for at in times:
            self.evaluate(by_time[round(at, 3)], at)


def replay_times(rule: AlertRule, now: float, interval: float) -> tuple[float, float, float]:
    """``(start, end, step)`` of the range query that rebuilds a rule's state before ``now``.

    It covers twice ``for`` + ``keep_firing_for``, so an alert pending (or
    firing) for longer than ``for`` keeps its real first-true time, not
    ``now - for`` (at most 2000 points: a long ``for`` is replayed at a coarser
    step, so the restored ``active_at`` is exact to one step). ``end`` is one
    interval before ``now``. An alert true for the whole replay shows its start
    as ``active_at``: it fires at once either way.
    """
    span = 2 * (rule.for_s + rule.keep_firing_for_s) + interval
    step = max(interval, span / _MAX_REPLAY_POINTS)
    end = now - interval
    return end - span, end, step
