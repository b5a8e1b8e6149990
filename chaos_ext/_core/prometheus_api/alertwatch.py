"""Alerts as stop conditions: which rules and firing alerts a watch follows, and verdicts.

The ``alerts`` section of an abort plan (or of the ``alerts_quiet`` probe)::

    alerts:
      rules: [coredns-mixin-alerts.yaml, kube-prometheus-rules.yaml]  # relative to the plan
      select: ["severity=critical"]        # any of these selectors; default: every alert
      firing: [prometheus, alertmanager]   # also alerts already firing there

``rules`` are evaluated by gameday itself through the query API with
Prometheus's pending/firing semantics
(:mod:`chaos_ext._core.prometheus_api.alertstate`); ``firing`` reads
Prometheus's ``/api/v1/alerts`` (state ``firing``) and Alertmanager's
``/api/v2/alerts`` (active, not silenced or inhibited), filtered by the same
selectors. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos_ext._core.prometheus_api.alertstate import ActiveAlert, RuleState
from chaos_ext._core.prometheus_api.rules import (
    AlertRule,
    Selector,
    load_rules,
    parse_selector,
    select_rules,
)
from chaos_ext.errors import InvalidArgument

__all__ = [
    "FIRING_SOURCES",
    "AlertSpec",
    "ExternalAlert",
    "FiringWatch",
    "firing_alerts",
    "parse_alerts_section",
    "rule_firing_detail",
]

FIRING_SOURCES = ("prometheus", "alertmanager")
_SECTION_KEYS = {"rules", "select", "firing"}


@dataclass(frozen=True)
class FiringWatch:
    """Alerts already firing in Prometheus or Alertmanager that stop a run."""

    source: str  # prometheus | alertmanager
    selectors: tuple[Selector, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return not self.selectors or any(s.matches(labels) for s in self.selectors)

    def describe(self) -> dict[str, Any]:
        return {"firing_in": self.source, "select": [s.text for s in self.selectors]}


@dataclass(frozen=True)
class AlertSpec:
    """Selected alerting rules plus firing-alert sources."""

    rules: tuple[AlertRule, ...] = ()
    firing: tuple[FiringWatch, ...] = ()


@dataclass(frozen=True)
class ExternalAlert:
    """An alert as Prometheus's or Alertmanager's API lists it."""

    source: str
    labels: Mapping[str, str]
    state: str
    since: str = ""  # firing since (Alertmanager: startsAt)
    summary: str = ""
    pending_since: str = ""  # Prometheus: activeAt


def _selectors(raw: Any, where: str) -> tuple[Selector, ...]:
    items = [raw] if isinstance(raw, str) else raw or []
    if not isinstance(items, list):
        raise InvalidArgument(f"{where}: 'select' is a selector or a list of selectors")
    return tuple(parse_selector(str(s)) for s in items)


def resolve_rules(
    paths: Sequence[str],
    selectors: Sequence[Selector],
    base: Path | None,
    required: bool = True,
) -> tuple[AlertRule, ...]:
    """Load rule files (relative paths from ``base``) and keep the selected alerts.

    With ``required``, selectors that pick nothing from all the files together
    are an error (a watch must never be silently empty).
    """
    loaded: list[AlertRule] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_absolute() and base is not None:
            path = base / path
        loaded.extend(load_rules(path))
    chosen = select_rules(loaded, selectors, ", ".join(paths), required=required)
    return tuple(chosen)


def parse_alerts_section(raw: Any, where: str, base: Path | None) -> AlertSpec:
    """The ``alerts`` section of a plan: load and select the rules, name the sources."""
    if raw is None:
        return AlertSpec()
    if not isinstance(raw, Mapping):
        raise InvalidArgument(f"{where}: 'alerts' must be a mapping with rules/select/firing")
    extra = sorted(set(raw) - _SECTION_KEYS)
    if extra:
        raise InvalidArgument(f"{where}: alerts: unknown key(s) {extra}")
    selectors = _selectors(raw.get("select"), f"{where}: alerts")
    paths = raw.get("rules") or []
    paths = [paths] if isinstance(paths, str) else paths
    firing = raw.get("firing") or []
    firing = [firing] if isinstance(firing, str) else firing
    unknown = sorted(set(map(str, firing)) - set(FIRING_SOURCES))
    if unknown:
        raise InvalidArgument(f"{where}: alerts.firing {unknown}: use {list(FIRING_SOURCES)}")
    if not paths and not firing:
        raise InvalidArgument(f"{where}: alerts needs 'rules' (files) and/or 'firing' sources")
    return AlertSpec(
        rules=resolve_rules([str(p) for p in paths], selectors, base) if paths else (),
        firing=tuple(FiringWatch(str(s), selectors) for s in firing),
    )


def rule_firing_detail(rule: AlertRule, alert: ActiveAlert) -> str:
    """One line: which alert, its labels, since when and why."""
    shown = {k: v for k, v in alert.labels.items() if k != "alertname"}
    summary = rule.annotations.get("summary") or rule.annotations.get("message") or ""
    since = alert.as_dict()
    return (
        f"{rule.name}{shown} firing since {since['fired_at']} (pending since "
        f"{since['active_at']}, for: {rule.for_s:g}s; value {alert.value:g})"
        + (f": {summary}" if summary else "")
    )


@dataclass
class FiringAlerts:
    """What one round found firing (for verdicts and the journal)."""

    rule_alerts: list[tuple[AlertRule, ActiveAlert]] = field(default_factory=list)
    external: list[ExternalAlert] = field(default_factory=list)


def firing_alerts(
    states: Sequence[RuleState],
    watches: Sequence[FiringWatch],
    external: Sequence[ExternalAlert],
) -> FiringAlerts:
    """Firing instances of the rules, and the external alerts a watch selects."""
    found = FiringAlerts()
    for state in states:
        found.rule_alerts.extend((state.rule, a) for a in state.firing())
    for alert in external:
        if alert.state != "firing":
            continue
        if any(w.source == alert.source and w.matches(alert.labels) for w in watches):
            found.external.append(alert)
    return found


@dataclass(frozen=True)
class AlertHit:
    """An alert that stops the run: what the verdict says."""

    name: str
    detail: str
    value: float | None
    alert: Mapping[str, Any]


RuleOutcome = Sequence[Any] | Exception  # the samples of a rule's expression, or the error
SourceOutcome = Sequence[ExternalAlert] | Exception


@dataclass
class AlertTracker:
    """Rule states across evaluations plus the firing-alert watches of a plan."""

    spec: AlertSpec
    states: list[RuleState] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.states = [RuleState(rule) for rule in self.spec.rules]

    def sources(self) -> list[str]:
        """The APIs to read each round (``prometheus``, ``alertmanager``)."""
        return sorted({w.source for w in self.spec.firing})

    def feed_rules(
        self, outcomes: Sequence[RuleOutcome], now: float, failed: list[Exception]
    ) -> AlertHit | None:
        """Evaluate each rule's answer; errors are handed back in ``failed``."""
        for state, outcome in zip(self.states, outcomes, strict=True):
            if isinstance(outcome, Exception):
                failed.append(outcome)
                continue
            state.evaluate(outcome, now)
        for state in self.states:
            for alert in state.firing():
                return AlertHit(
                    state.rule.name,
                    rule_firing_detail(state.rule, alert),
                    alert.value,
                    {**alert.as_dict(), "source": "rules", "rule": state.rule.describe()},
                )
        return None

    def feed_sources(
        self, outcomes: Mapping[str, SourceOutcome], failed: list[Exception]
    ) -> AlertHit | None:
        """Match the alerts each API lists against the watches' selectors."""
        external: list[ExternalAlert] = []
        for outcome in outcomes.values():
            if isinstance(outcome, Exception):
                failed.append(outcome)
            else:
                external.extend(outcome)
        for alert in firing_alerts([], self.spec.firing, external).external:
            name = alert.labels.get("alertname", "alert")
            shown = {k: v for k, v in alert.labels.items() if k != "alertname"}
            detail = f"{name}{shown} firing in {alert.source} since {alert.since}"
            if alert.pending_since:
                detail += f" (pending since {alert.pending_since})"
            return AlertHit(
                name,
                detail + (f": {alert.summary}" if alert.summary else ""),
                None,
                {
                    "labels": dict(alert.labels),
                    "state": "firing",
                    "source": alert.source,
                    "since": alert.since,
                    "pending_since": alert.pending_since or None,
                },
            )
        return None

    def pending(self) -> list[dict[str, Any]]:
        """Instances pending or firing now, for the journal."""
        return [
            {"alert": s.rule.name, **a.as_dict()} for s in self.states for a in s.active.values()
        ]
