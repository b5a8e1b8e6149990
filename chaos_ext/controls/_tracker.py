"""The pure bookkeeping of an abort watch: consecutive breaches, unreachable checks,
alert states, and the verdict that says why the watch fired (plans: ``_plan``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chaos_ext._core.prometheus_api.alertwatch import (
    AlertHit,
    AlertTracker,
    RuleOutcome,
    SourceOutcome,
)
from chaos_ext.controls._plan import AbortCondition, AbortPlan
from chaos_ext.errors import EmptyResult, PrometheusHTTPError, PrometheusUnreachable

__all__ = ["Tracker", "Verdict"]


@dataclass(frozen=True)
class Verdict:
    """Why the watch fired."""

    reason: str  # breach | unreachable | error
    condition: str
    detail: str
    value: float | None = None
    at: float = 0.0
    alert: Mapping[str, Any] | None = None  # reason "alert": labels, pending/firing since

    def as_dict(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "condition": self.condition,
            "detail": self.detail,
            "value": self.value,
            "at_unix": round(self.at, 3),
            **({"alert": dict(self.alert)} if self.alert else {}),
        }


@dataclass
class Tracker:
    """Counts consecutive breaches and unreachable checks; says when to abort."""

    plan: AbortPlan
    checks: int = 0
    no_data: int = 0
    unreachable_streak: int = 0
    streaks: dict[str, int] = field(default_factory=dict)
    last: dict[str, float | None] = field(default_factory=dict)
    alerts: AlertTracker = field(init=False)

    def __post_init__(self) -> None:
        self.alerts = AlertTracker(self.plan.alerts)

    def tick(
        self,
        outcomes: Sequence[tuple[AbortCondition, float | Exception]],
        now: float,
        rules: Sequence[RuleOutcome] = (),
        sources: Mapping[str, SourceOutcome] | None = None,
        eval_at: float | None = None,
    ) -> Verdict | None:
        """Feed one round of results (a value or the error per condition; the
        samples of each alert rule; the alerts each firing source lists).

        A query Prometheus rejects (or any other error) aborts at once: the run
        would otherwise go on unprotected.
        """
        self.checks += 1
        unreachable: list[str] = []
        for condition, outcome in outcomes:
            verdict = self._one(condition, outcome, now, unreachable)
            if verdict is not None:
                return verdict
        verdict = self._alerts(rules, sources or {}, now, eval_at or now, unreachable)
        if verdict is not None:
            return verdict
        self.unreachable_streak = self.unreachable_streak + 1 if unreachable else 0
        if self.unreachable_streak >= self.plan.unreachable_after:
            return Verdict(
                "unreachable",
                "prometheus",
                f"{self.unreachable_streak} checks in a row failed: {unreachable[0]}",
                at=now,
            )
        return None

    def _alerts(
        self,
        rules: Sequence[RuleOutcome],
        sources: Mapping[str, SourceOutcome],
        now: float,
        eval_at: float,
        unreachable: list[str],
    ) -> Verdict | None:
        failed: list[Exception] = []
        hit: AlertHit | None = None
        if self.alerts.states:
            hit = self.alerts.feed_rules(rules, eval_at, failed)
        if hit is None and sources:
            hit = self.alerts.feed_sources(sources, failed)
        for error in failed:
            if not isinstance(error, PrometheusUnreachable | PrometheusHTTPError):
                return Verdict("error", "alerts", str(error), at=now)
            unreachable.append(str(error))
        if hit is None:
            return None
        return Verdict("alert", hit.name, hit.detail, value=hit.value, at=now, alert=hit.alert)

    def _one(
        self,
        condition: AbortCondition,
        outcome: float | Exception,
        now: float,
        unreachable: list[str],
    ) -> Verdict | None:
        if isinstance(outcome, EmptyResult):
            self.no_data += 1
            self.last[condition.name] = None
            return None
        if isinstance(outcome, PrometheusUnreachable | PrometheusHTTPError):
            unreachable.append(str(outcome))  # no usable answer (down, 5xx, auth): fail-safe
            return None
        if isinstance(outcome, Exception):
            return Verdict("error", condition.name, str(outcome), at=now)
        self.last[condition.name] = outcome
        if condition.tolerance.holds(outcome):
            self.streaks[condition.name] = 0
            return None
        streak = self.streaks.get(condition.name, 0) + 1
        self.streaks[condition.name] = streak
        if streak < condition.breaches:
            return None
        return Verdict(
            "breach",
            condition.name,
            f"{outcome:g} is not {condition.tolerance.describe()} ({condition.expr})",
            value=outcome,
            at=now,
        )
