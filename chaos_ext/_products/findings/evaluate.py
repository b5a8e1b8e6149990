"""Findings from journals and rules (pure): the cause the evidence supports, or "cause unknown".

For each run whose hypothesis deviated, every rule is tried (:mod:`.rules`): its
evidence holds when one of its fault kinds was on during the run, the load's first
error class is one it names (when it names any), and each of its metric conditions
holds on a method probe of the run. Each rule that holds gives a finding with its
cause, its fix and its proof, and the facts that made it hold. When none holds, the
finding says **cause unknown**, what the evidence lacked, and what to measure next:
never a guess. A run that held (or did not run its faults) has no finding.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from chaos_ext._core.timeline import WINDOW_PHRASES
from chaos_ext._products.findings.evidence import MetricValue, RunEvidence, evidence_of
from chaos_ext._products.findings.rules import Fix, MetricCondition, Proof, Rule
from chaos_ext._runner.verdict import hypothesis_outcome

__all__ = ["CAUSE_UNKNOWN", "Finding", "findings_of", "findings_of_journals"]

CAUSE_UNKNOWN = "cause unknown"
_GENERIC_NEXT = (
    "measure the errors by cause while the fault is on: drive the load with a cause_header and"
    " add an error_onset probe (docs/load.md), or a method probe of the app's errors by cause;"
    " then add a rule for this fault ($GAMEDAY_FINDINGS, docs/advice.md)"
)
_VAR = re.compile(r"\$\{([\w.-]+)\}")


@dataclass(frozen=True)
class Finding:
    """What one deviated run's evidence says: a cause with its fix and proof, or none."""

    experiment: str  # the experiment's title
    experiment_path: str
    source: str  # the journal
    rule: str  # the rule that held ("" : cause unknown)
    title: str
    cause: str
    evidence: tuple[str, ...]  # the facts, one line each
    fix: Fix | None
    proof: Proof | None
    measure_next: str

    @property
    def known(self) -> bool:
        return bool(self.rule)

    def as_dict(self) -> dict[str, Any]:
        return {
            "experiment": self.experiment,
            "experiment_path": self.experiment_path,
            "journal": self.source,
            "rule": self.rule or None,
            "title": self.title,
            "cause": self.cause,
            "evidence": list(self.evidence),
            "fix": None
            if self.fix is None
            else {"setting": self.fix.setting, "change": self.fix.change},
            "proof": None if self.proof is None else self.proof.lines(),
            "measure_next": self.measure_next,
        }


def _metric_hits(
    run: RunEvidence, condition: MetricCondition
) -> tuple[list[MetricValue], list[MetricValue]]:
    """The probes ``condition`` names whose figure holds it, and those whose figure does not."""
    found = [run.metric(name, condition.key) for name in run.outputs if condition.matches(name)]
    values = [v for v in found if v is not None]
    return [v for v in values if condition.holds(v.value)], [
        v for v in values if not condition.holds(v.value)
    ]


def _metric_line(run: RunEvidence, value: MetricValue, condition: MetricCondition) -> str:
    name = f"{value.probe}.{value.key}" if value.key else value.probe
    peak = " (peak)" if value.series else ""
    crossed = value.first_time(condition.above, condition.below)
    when = f" at {run.since_start(crossed)}" if crossed is not None else ""
    return f"metric that moved: {name} = {value.value:.4g}{peak}{when} ({condition.describe()})"


def _fault_lines(run: RunEvidence, kinds: Iterable[str]) -> list[str]:
    lines = []
    for f in run.faults:
        if f.kind in kinds:
            held = f" for {f.off - f.on:.0f} s" if f.off is not None else " (never closed)"
            lines.append(f"fault on: {f.kind} on {f.target} from {run.since_start(f.on)}{held}")
    return lines


def _error_line(run: RunEvidence) -> list[str]:
    first = run.first_error
    if first is None:
        return []
    if first.onset_at is None and first.onset_rate is None:
        classes = ", ".join(f"{e.error_class} {e.count}" for e in run.errors)
        return [f"errors of the load by class: {classes} (the journal has no onset)"]
    load = f" at {first.onset_rate:g} req/s" if first.onset_rate is not None else ""
    at = f", {run.since_start(first.onset_at)}" if first.onset_at is not None else ""
    return [f"error class that began first: {first.error_class}{load}{at} ({first.count} errors)"]


def _deviation_lines(run: RunEvidence) -> list[str]:
    return [
        f"deviated: {d.probe} = {d.text} {WINDOW_PHRASES.get(d.window, d.window)}"
        f" ({run.since_start(d.at)})"
        for d in run.deviations
    ]


def _filled(text: str, run: RunEvidence, moved: Sequence[str] = ()) -> str:
    """``${activity}``, ``${activity.key}`` or ``${key}`` (the first method activity whose
    output has it) replaced by the run's figure, ``${first_error_class}`` and
    ``${first_error_rate}`` by the load's first error class and its onset load; left as is
    when the run has none. A ``${key}`` is looked for first in the activities that moved
    (``moved``: those the rule's conditions held on), then in the method's order."""

    first = run.first_error
    onset = {
        "first_error_class": first.error_class if first else None,
        "first_error_rate": f"{first.onset_rate:g}" if first and first.onset_rate else None,
    }

    def value(match: re.Match[str]) -> str:
        if onset.get(match.group(1)):
            return str(onset[match.group(1)])
        probe, _, key = match.group(1).partition(".")
        figure = run.metric(probe, key)
        if figure is None and not key:
            found = (run.metric(name, probe) for name in moved)
            figure = next((f for f in found if f is not None), None) or run.any_key(probe)
        return match.group(0) if figure is None else f"{figure.value:g}"

    return _VAR.sub(value, text)


@dataclass(frozen=True)
class _Tried:
    facts: list[str]  # what held, one line each
    missing: list[str]  # what did not
    moved: list[str]  # the activities whose figures held the rule's conditions


def _try(rule: Rule, run: RunEvidence) -> _Tried | None:
    """What held and what did not, when one of the rule's faults was on; None when none was."""
    kinds = {f.kind for f in run.faults}
    if not kinds & set(rule.evidence.faults):
        return None
    facts, missing, moved = _fault_lines(run, rule.evidence.faults), [], []
    first = run.first_error
    if rule.evidence.errors_first and (
        first is None or first.error_class not in rule.evidence.errors_first
    ):
        began = first.error_class if first else "no error class was measured"
        missing.append(
            f"the first error class is not {'/'.join(rule.evidence.errors_first)} ({began})"
        )
    for condition in rule.evidence.metrics:
        holds, fails = _metric_hits(run, condition)
        if holds:
            facts.append(_metric_line(run, holds[0], condition))
            moved.append(holds[0].probe)
        elif fails:
            missing.append(f"{condition.describe()} did not hold ({fails[0].value:.4g})")
        else:
            missing.append(f"no method probe {condition.probe!r} measured it")
    return _Tried(facts, missing, moved)


def _known(rule: Rule, run: RunEvidence, tried: _Tried, source: str) -> Finding:
    facts, moved = tried.facts, tried.moved
    return Finding(
        experiment=run.title,
        experiment_path=run.experiment,
        source=source,
        rule=rule.name,
        title=rule.title,
        cause=_filled(rule.cause, run, moved),
        evidence=(*facts, *_error_line(run), *_deviation_lines(run)),
        fix=Fix(_filled(rule.fix.setting, run, moved), _filled(rule.fix.change, run, moved)),
        proof=replace(rule.proof, experiment=run.experiment or rule.proof.experiment),
        measure_next="",
    )


def _unknown(run: RunEvidence, near: list[tuple[Rule, list[str]]], source: str) -> Finding:
    kinds = sorted({f.kind for f in run.faults}) or ["none recorded"]
    lacking = [f"rule {r.name}: {'; '.join(m)}" for r, m in near]
    nexts = [r.measure_next for r, _ in near] or [_GENERIC_NEXT]
    return Finding(
        experiment=run.title,
        experiment_path=run.experiment,
        source=source,
        rule="",
        title=CAUSE_UNKNOWN,
        cause=f"{CAUSE_UNKNOWN}: no rule's evidence holds (faults on: {', '.join(kinds)})",
        evidence=(*_fault_lines(run, kinds), *_error_line(run), *_deviation_lines(run), *lacking),
        fix=None,
        proof=None,
        measure_next="; ".join(nexts),
    )


def findings_of(
    journal: Mapping[str, Any], rules: Sequence[Rule], source: str = ""
) -> list[Finding]:
    """The findings of one journal: none unless its hypothesis deviated."""
    outcome = hypothesis_outcome(journal)
    if outcome != "deviated":
        return []
    run = evidence_of(journal, outcome, source)
    found, near = [], []
    for rule in rules:
        tried = _try(rule, run)
        if tried is None:
            continue
        if tried.missing:
            near.append((rule, tried.missing))
        else:
            found.append(_known(rule, run, tried, source))
    return found or [_unknown(run, near, source)]


def findings_of_journals(
    journals: Iterable[tuple[str, Mapping[str, Any]]], rules: Sequence[Rule]
) -> list[Finding]:
    """The findings of every ``(source, journal)``, in order."""
    return [f for source, journal in journals for f in findings_of(journal, rules, source)]
