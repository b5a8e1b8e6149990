"""The abort watch's thread: evaluates an abort plan every interval until stopped or fired.

Private to :mod:`chaos_ext.controls.stop_conditions`, the one public entry (which
re-exports :class:`AbortWatch`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from chaos_ext._core.prometheus_api.alertsources import alertmanager_alerts, prometheus_alerts
from chaos_ext._core.prometheus_api.alertstate import RuleState
from chaos_ext._core.prometheus_api.alertwatch import RuleOutcome, SourceOutcome
from chaos_ext._core.prometheus_api.client import PrometheusClient, client
from chaos_ext._core.prometheus_api.replay import restore
from chaos_ext._core.prometheus_api.results import parse_instant, single_value
from chaos_ext.controls._plan import AbortCondition, AbortPlan
from chaos_ext.controls._tracker import Tracker, Verdict
from chaos_ext.errors import ChaosExtError, InvalidArgument

__all__ = ["START_TIMEOUT", "AbortWatch", "needs", "prometheus_secrets"]


def prometheus_secrets(secrets: Mapping[str, Any] | None) -> dict[str, Any]:
    """Run-level secrets are scoped: use the ``prometheus`` scope, else all scopes merged."""
    if not secrets:
        return {}
    if isinstance(secrets.get("prometheus"), Mapping):
        return dict(secrets["prometheus"])
    merged: dict[str, Any] = {}
    for value in secrets.values():
        if isinstance(value, Mapping):
            merged.update(value)
    return merged


START_TIMEOUT = 5.0
"""Seconds Prometheus has to answer before a watch starts (a busy 2-core CI box
answers ``vector(1)`` in milliseconds; 5 s is a dead or unreachable server)."""


def needs(plan: AbortPlan) -> tuple[bool, bool]:
    """Whether the plan reads Prometheus, and whether it reads Alertmanager."""
    firing = {watch.source for watch in plan.alerts.firing}
    prometheus = bool(plan.conditions or plan.alerts.rules or "prometheus" in firing)
    return prometheus, "alertmanager" in firing


def _evaluate(prom: PrometheusClient, condition: AbortCondition) -> float | Exception:
    """The condition's value; with several series, one that breaches if any does."""
    expr = condition.expr
    try:
        samples = parse_instant(prom.instant(expr), expr)
        if not samples:
            return single_value([], expr, if_empty=condition.if_empty)
        values = [single_value([s], expr, if_nan=condition.if_nan) for s in samples]
    except ChaosExtError as exc:
        return exc
    bad = [v for v in values if not condition.tolerance.holds(v)]
    return bad[0] if bad else values[0]


def _rule_samples(prom: PrometheusClient, state: RuleState) -> RuleOutcome:
    try:
        return parse_instant(prom.instant(state.rule.expr), state.rule.expr)
    except ChaosExtError as exc:
        return exc


class AbortWatch:
    """The watch thread: evaluates the plan every interval until stopped or fired."""

    def __init__(
        self,
        plan: AbortPlan,
        configuration: Mapping[str, Any] | None,
        secrets: Mapping[str, Any] | None,
        on_fire: Callable[[Verdict], None],
    ) -> None:
        self.plan = plan
        self.tracker = Tracker(plan)
        self.verdict: Verdict | None = None
        # an Alertmanager-only plan needs no Prometheus (nor its prometheus_url)
        self._client = (
            client(configuration, prometheus_secrets(secrets), timeout=plan.timeout, retries=0)
            if needs(plan)[0]
            else None
        )
        self._configuration, self._secrets = configuration, secrets
        self._on_fire = on_fire
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="gameday-abort", daemon=True)

    @property
    def _prom(self) -> PrometheusClient:
        if self._client is None:  # pragma: no cover - only plans that read Prometheus ask
            raise InvalidArgument("this abort plan reads no Prometheus")
        return self._client

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (idempotent); after it returns the watch never fires."""
        with self._lock:
            self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            checks = len(self.plan.conditions) + len(self.plan.alerts.rules) + 2
            self._thread.join(timeout=self.plan.timeout * checks + 5)

    def _restore_all(self) -> dict[int, Exception]:
        errors: dict[int, Exception] = {}
        now = time.time()
        for index, state in enumerate(self.tracker.alerts.states):
            try:
                restore(self._prom, state, now, self.plan.interval)
            except ChaosExtError as exc:
                errors[index] = exc
        return errors

    def _sources(self) -> dict[str, SourceOutcome]:
        found: dict[str, SourceOutcome] = {}
        for source in self.tracker.alerts.sources():
            try:
                if source == "alertmanager":
                    found[source] = alertmanager_alerts(
                        self._configuration, self._secrets, self.plan.timeout
                    )
                else:
                    found[source] = prometheus_alerts(self._prom)
            except ChaosExtError as exc:
                found[source] = exc
        return found

    def _round(self, first_errors: dict[int, Exception], eval_at: float) -> Verdict | None:
        outcomes = [(c, _evaluate(self._prom, c)) for c in self.plan.conditions]
        rules = [
            first_errors.get(i) or _rule_samples(self._prom, state)
            for i, state in enumerate(self.tracker.alerts.states)
        ]
        sources = self._sources()
        return self.tracker.tick(outcomes, time.time(), rules, sources, eval_at=eval_at)

    def _loop(self) -> None:
        first_errors = self._restore_all()
        next_due, wall_start = time.monotonic(), time.time()
        start = next_due
        while not self._stop.is_set():
            # rules are evaluated at exact multiples of the interval, as Prometheus's
            # rule groups are: `for: 60s` fires at the evaluation 60 s after the first
            verdict = self._round(first_errors, wall_start + (next_due - start))
            first_errors = {}
            if verdict is not None:
                with self._lock:
                    if self._stop.is_set():
                        return
                    self.verdict = verdict
                    self._stop.set()
                    self._on_fire(verdict)
                return
            next_due += self.plan.interval
            self._stop.wait(max(0.0, next_due - time.monotonic()))

    def record(self) -> dict[str, Any]:
        """What the journal keeps: the plan, how many checks ran, and the verdict."""
        verdict, fired = self.verdict, None
        if verdict is not None:
            fired = {**verdict.as_dict(), "at": datetime.fromtimestamp(verdict.at, UTC).isoformat()}
        return {
            "plan": self.plan.source,
            "interval_seconds": self.plan.interval,
            "unreachable_after": self.plan.unreachable_after,
            "conditions": self.plan.describe(),
            "checks": self.tracker.checks,
            "no_data": self.tracker.no_data,
            "last_values": dict(self.tracker.last),
            "alerts_active": self.tracker.alerts.pending(),
            "fired": fired,
        }
