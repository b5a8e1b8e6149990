"""A typed, read-only view of one Chaos Toolkit journal written by ``gameday run``.

:func:`load_journal` reads and redacts a journal file; :func:`view_of` turns a
journal dict into a :class:`RunView`: the run's one timeline (``view.timeline``,
:func:`chaos_ext._core.timeline.timeline_of`: what was on when, every
measurement in its window), the hypothesis checks per chaoslib phase, the
method and rollback activities, the bands the charts shade (faults, loads and
action runs, from the timeline) and every numeric time series. The texts it
shows (title, description, activity names) have their ``${var}`` substituted.
Pure: no I/O besides :func:`load_journal`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from chaos_ext._core.timeline import (
    ACTIONS_KIND,
    Timeline,
    journal_vars,
    substitute,
    timeline_of,
)
from chaos_ext._products.findings import Finding
from chaos_ext._products.report.findings import findings_part
from chaos_ext._products.report.incidents import IncidentView, incident_part
from chaos_ext._products.report.journals import inline_secrets, load_journal, redact_journal
from chaos_ext._products.report.notes import clock, notes_part, recovery_line
from chaos_ext._products.report.series import Series, as_number, parse_time, series_of
from chaos_ext._products.report.units import units_of
from chaos_ext._runner.verdict import (
    RETRY_COMMAND,
    failing_result,
    hypothesis_outcome,
    outcome_of,
    rollback_problems,
    unsteady_reason,
)
from chaos_ext.errors import JournalError

__all__ = [
    "Activity",
    "Check",
    "FaultWindow",
    "JournalError",
    "RunView",
    "as_number",
    "inline_secrets",
    "load_journal",
    "parse_time",
    "redact_journal",
    "retry_commands",
    "unsteady_text",
    "view_of",
]

PHASES = ("before", "during", "after")


@dataclass(frozen=True)
class Check:
    """One evaluation of one hypothesis probe in one phase."""

    probe: str
    phase: str
    output: Any
    tolerance: Any
    met: bool | None
    status: str
    start: float | None
    end: float | None
    error: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Activity:
    """One activity run of the method or the rollbacks."""

    name: str
    kind: str
    status: str
    start: float | None
    end: float | None
    output: Any
    error: str | None
    background: bool = False
    failure: str | None = None  # a failing result (verdict.failing_result), accepted or not

    @property
    def duration(self) -> float | None:
        if self.start is None or self.end is None:
            return None
        return max(0.0, self.end - self.start)


@dataclass(frozen=True)
class FaultWindow:
    """A band of a chart: a fault in place (a ledger entry on..off, or the experiment's
    own actions until the rollbacks), a load running, or an action running."""

    label: str
    start: float
    end: float
    source: str  # "ledger" | "actions" (faults) | "load" | "action" (an action's own run)


@dataclass(frozen=True)
class RunView:
    """Everything a report, a gate or a comparison needs from one journal."""

    title: str
    description: str
    hypothesis_title: str
    hypothesis_probes: tuple[str, ...]
    tolerances: Mapping[str, Any]
    outcome: str
    status: str
    start: float | None
    end: float | None
    checks: tuple[Check, ...]
    method: tuple[Activity, ...]
    rollbacks: tuple[Activity, ...]
    windows: tuple[FaultWindow, ...]
    series: tuple[Series, ...]
    ledger: tuple[Mapping[str, Any], ...]
    sweep: tuple[Mapping[str, Any], ...]
    run_id: str
    source: str
    weight: float
    error: str | None = None
    abort: Mapping[str, Any] | None = None  # gameday.abort.fired: the stop condition that fired
    hypothesis_outcome: str = ""  # the outcome with rollbacks aside (held/deviated/unsteady...)
    rollback_problems: tuple[str, ...] = ()  # what may still be injected (rollback-failed)
    settle: Mapping[str, Any] | None = None  # gameday.settle: how long it took to settle
    unsteady_reason: str = ""  # which probes were out of tolerance before the method
    journal_path: str = ""  # where gameday run wrote this journal (for retry commands)
    failures: tuple[str, ...] = ()  # method activities with a failing result (outcome failed)
    accepted: tuple[str, ...] = ()  # failing results the experiment accepts (accept_failures)
    unprotected: tuple[str, ...] = ()  # controls --allow-missing-controls ran without
    retried: tuple[Mapping[str, Any], ...] = ()  # rollbacks that failed, then a retry succeeded
    not_run: str = ""  # why a batch did not start this experiment
    ended: str = ""  # "ungracefully" after chaoslib.exit.exit_ungracefully
    rollbacks_skipped: str = ""  # why no rollback ran (nothing was injected)
    recovery: Mapping[str, Any] | None = None  # gameday.recovery: how fast it came back
    incident: IncidentView | None = None  # an incident replay's errors by cause, amplification
    findings: tuple[Finding, ...] = ()  # a deviated run's cause, fix and proof (or cause unknown)
    findings_error: str = ""  # why no finding could be made (a rule file gameday cannot use)
    timeline: Timeline = field(default_factory=lambda: Timeline(0.0, 0.0))  # the run's one
    text_vars: Mapping[str, Any] = field(default_factory=dict)  # ${var} values of its texts
    units: Mapping[str, str] = field(default_factory=dict)  # series name -> unit (units.py)

    def shown(self, text: str) -> str:
        """``text`` with the run's ``${var}`` substituted (a probe's name, say)."""
        return substitute(text, self.text_vars)

    @property
    def time_to_recover_s(self) -> float | None:
        value = (self.recovery or {}).get("time_to_recover_s")
        return float(value) if isinstance(value, int | float) else None

    @property
    def notes(self) -> tuple[str, ...]:
        """What a reader must know besides the outcome, one line each."""
        lines = [f"not run: {self.not_run}"] if self.not_run else []
        if self.ended == "ungracefully":
            lines.append(
                "the run ended ungracefully (exit_ungracefully): gameday ran the "
                "rollbacks chaoslib skips then"
            )
        lines += [f"failing result: {f}" for f in self.failures]
        lines += [f"accepted by the experiment (accept_failures): {a}" for a in self.accepted]
        lines += [
            f"ran WITHOUT a safety control (--allow-missing-controls): {u}"
            for u in self.unprotected
        ]
        lines += [
            f"rollback '{r.get('name')}' failed, then retried successfully at {clock(r.get('at'))}"
            for r in self.retried
        ]
        if self.rollbacks_skipped:
            lines.append(self.rollbacks_skipped)
        if recovered := recovery_line(self.recovery):
            lines.append(recovered)
        return (*lines, *self.timeline.notes)

    @property
    def injected(self) -> bool:
        """Whether the method ran (an unsteady run injected nothing)."""
        return self.hypothesis_outcome != "unsteady" and bool(self.method)

    @property
    def abort_text(self) -> str | None:
        """``stopped by <condition> (<reason>): <detail> at +<t> s``, when one fired."""
        if not self.abort:
            return None
        at = as_number(self.abort.get("at_unix")) or parse_time(self.abort.get("at"))
        offset = f" at +{at - self.start:.1f} s" if at is not None and self.start else ""
        what = self.abort.get("condition") or "an abort condition"
        detail = self.abort.get("detail") or self.abort.get("value") or ""
        return f"stopped by {what} ({self.abort.get('reason', 'breach')}): {detail}{offset}"

    @property
    def abort_at(self) -> float | None:
        if not self.abort:
            return None
        return as_number(self.abort.get("at_unix")) or parse_time(self.abort.get("at"))

    def checks_for(self, probe: str, phase: str) -> list[Check]:
        return [c for c in self.checks if c.probe == probe and c.phase == phase]

    @property
    def duration(self) -> float | None:
        if self.start is None or self.end is None:
            return None
        return max(0.0, self.end - self.start)


def _check(run: Mapping[str, Any], phase: str, tolerances: Mapping[str, Any]) -> Check:
    activity = run.get("activity") or {}
    name = str(activity.get("name", "?"))
    met = run.get("tolerance_met")
    return Check(
        probe=name,
        phase=phase,
        output=run.get("output"),
        tolerance=activity.get("tolerance", tolerances.get(name)),
        met=bool(met) if met is not None else None,
        status=str(run.get("status", "?")),
        start=parse_time(run.get("start")),
        end=parse_time(run.get("end")),
        error=_error_text(run),
        arguments=(activity.get("provider") or {}).get("arguments") or {},
    )


def _checks(journal: Mapping[str, Any], tolerances: Mapping[str, Any]) -> list[Check]:
    states = journal.get("steady_states") or {}
    found: list[Check] = []
    for phase in PHASES:
        block = states.get(phase)
        blocks = block if isinstance(block, list) else [block] if block else []
        for item in blocks:
            for run in (item or {}).get("probes") or []:
                found.append(_check(run, phase, tolerances))
    return found


def _error_text(run: Mapping[str, Any]) -> str | None:
    error = run.get("exception")
    if isinstance(error, list):
        lines = [str(x).strip() for x in error if str(x).strip()]
        return lines[-1] if lines else None
    return str(error) if error else None


def _activity(run: Mapping[str, Any], values: Mapping[str, Any]) -> Activity:
    activity = run.get("activity") or {}
    return Activity(
        name=substitute(str(activity.get("name", "?")), values),
        kind=str(activity.get("type", "?")),
        status=str(run.get("status", "?")),
        start=parse_time(run.get("start")),
        end=parse_time(run.get("end")),
        output=run.get("output"),
        error=_error_text(run),
        background=bool(activity.get("background")),
        failure=failing_result(run),
    )


def _windows(method: tuple[Activity, ...], timeline: Timeline) -> list[FaultWindow]:
    """The charts' bands, from the timeline: faults (never a load: its own band), then
    each method action's own run; an entry still open runs to the timeline's end."""
    windows: list[FaultWindow] = []
    for entry in timeline.entries:
        if entry.role == "bookkeeping":
            continue
        source = "load" if entry.role == "load" else "ledger"
        if entry.kind == ACTIONS_KIND:
            source = "actions"
        end = entry.off if entry.off is not None else timeline.end
        label = f"{entry.kind} on {entry.target}"
        windows.append(FaultWindow(label, entry.on, max(entry.on, end), source))
    for act in method:
        if act.kind == "action" and act.start is not None and act.end is not None:
            windows.append(FaultWindow(act.name, act.start, max(act.start, act.end), "action"))
    return windows


def _weight(experiment: Mapping[str, Any]) -> float:
    for ext in experiment.get("extensions") or []:
        if isinstance(ext, Mapping) and ext.get("name") == "gameday":
            weight = as_number(ext.get("weight"))
            if weight is not None and weight >= 0:
                return weight
    return 1.0


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    """The objects of a journal list (anything else in it is ignored)."""
    return [item for item in value or [] if isinstance(item, Mapping)]


def _experiment_part(journal: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """What the experiment declares: title, description, hypothesis and its tolerances (the
    texts with their ``${var}`` substituted; the probes keep their names as written)."""
    experiment = journal.get("experiment") or {}
    hypothesis = experiment.get("steady-state-hypothesis") or {}
    tolerances = {
        str(p.get("name")): p.get("tolerance") for p in _mappings(hypothesis.get("probes"))
    }
    return {
        "title": substitute(str(experiment.get("title", "(untitled experiment)")), values),
        "description": substitute(str(experiment.get("description", "")), values),
        "hypothesis_title": substitute(str(hypothesis.get("title", "")), values),
        "hypothesis_probes": tuple(tolerances),
        "tolerances": tolerances,
        "weight": _weight(experiment),
    }


def _gameday_part(journal: Mapping[str, Any], source: str) -> dict[str, Any]:
    """What ``gameday run`` added under ``gameday``: ledger, sweep, run id, abort, settling."""
    gameday = journal.get("gameday") or {}
    settle = gameday.get("settle")
    return {
        "ledger": tuple(_mappings(gameday.get("ledger"))),
        "sweep": tuple(_mappings(gameday.get("sweep"))),
        "run_id": str(gameday.get("run_id", "")),
        "source": source or str(gameday.get("experiment_path", "")),
        "error": gameday.get("error"),
        "abort": _fired(gameday.get("abort")),
        "settle": settle if isinstance(settle, Mapping) else None,
        "journal_path": str(gameday.get("journal_path") or source or ""),
    }


def _verdict_part(journal: Mapping[str, Any], gameday: Mapping[str, Any]) -> dict[str, Any]:
    """The outcome as ``chaos_ext._runner.verdict`` judges it."""
    return {
        "outcome": outcome_of(journal),
        "hypothesis_outcome": hypothesis_outcome(journal),
        "rollback_problems": tuple(
            rollback_problems(journal, list(gameday["sweep"]), list(gameday["ledger"]))
        ),
        "unsteady_reason": unsteady_reason(journal),
        "status": str(journal.get("status", "?")),
    }


def view_of(journal: Mapping[str, Any], source: str = "") -> RunView:
    """The typed view of one journal (already redacted), built part by part."""
    values = journal_vars(journal)
    timeline = timeline_of(journal)
    declared = _experiment_part(journal, values)
    gameday = _gameday_part(journal, source)
    method = tuple(_activity(r, values) for r in _mappings(journal.get("run")))
    end = parse_time(journal.get("end"))
    series = tuple(series_of(journal, timeline))
    return RunView(
        **declared,
        **gameday,
        **_verdict_part(journal, gameday),
        **notes_part(journal),
        **incident_part(journal),
        **findings_part(journal, source),
        start=parse_time(journal.get("start")),
        end=end,
        checks=tuple(_checks(journal, declared["tolerances"])),
        method=method,
        rollbacks=tuple(_activity(r, values) for r in _mappings(journal.get("rollbacks"))),
        windows=tuple(_windows(method, timeline)),
        series=series,
        timeline=timeline,
        text_vars=values,
        units=units_of(((s.name, s.boolean) for s in series), journal.get("experiment") or {}),
    )


def unsteady_text(view: RunView) -> str:
    """Why the run was unsteady (empty for other outcomes)."""
    return view.unsteady_reason if view.hypothesis_outcome == "unsteady" else ""


def retry_commands(view: RunView) -> list[str]:
    """The commands that retry what may still be injected after ``view``'s run."""
    commands = []
    if any(not str(p).startswith("rollback '") for p in view.rollback_problems):
        commands.append(f"{RETRY_COMMAND} --run {view.run_id}" if view.run_id else RETRY_COMMAND)
    if any(str(p).startswith("rollback '") for p in view.rollback_problems) and view.journal_path:
        commands.append(f"{RETRY_COMMAND} --journal {view.journal_path}")
    return commands


def _fired(abort: Any) -> Mapping[str, Any] | None:
    fired = abort.get("fired") if isinstance(abort, Mapping) else None
    return fired if isinstance(fired, Mapping) else None
