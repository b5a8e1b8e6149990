"""Run one experiment through chaostoolkit-lib, with rollbacks on every exit path.

chaoslib runs the experiment (hypothesis, method, rollbacks) with the rollback
strategy forced to ``always``; whatever way it ends (completed, deviated,
failed, aborted, SIGINT, SIGTERM), the ledger entries this run left open are
then undone, with further signals held off until that sweep is done. With
``settle_seconds``, the hypothesis must hold before the method may start
(:mod:`chaos_ext._runner.settle`). The outcome and exit code come from
:mod:`chaos_ext._runner.verdict`: a rollback that did not complete is
``rollback-failed`` (exit 2) whatever the hypothesis did.
"""

from __future__ import annotations

import copy
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaoslib.caching import cache_activities, clear_cache
from chaoslib.exceptions import ChaosException, InterruptExecution
from chaoslib.run import RunEventHandler, Runner, initialize_run_journal
from chaoslib.settings import get_loaded_settings
from chaoslib.types import Schedule, Strategy
from rich.console import Console
from rich.markup import escape

from chaos_ext._core import stop as _stop
from chaos_ext._core.ledger import Ledger, UndoOutcome, set_current_run_id, set_watchdog_grace
from chaos_ext._core.timeline import build_timeline
from chaos_ext._runner import signals
from chaos_ext._runner.boundaries import StopBoundaries
from chaos_ext._runner.control_checks import clean_up_refused_run
from chaos_ext._runner.phases import PhaseMarks, phase
from chaos_ext._runner.progress import ProgressPrinter
from chaos_ext._runner.recovery import check_recovery
from chaos_ext._runner.redact import Redactor, secret_values
from chaos_ext._runner.rollbacks import (
    NOT_INJECTED,
    RollbackPolicy,
    rollbacks_when_injected,
    run_skipped_rollbacks,
)
from chaos_ext._runner.run_times import DEFAULT_RECOVER_S
from chaos_ext._runner.settle import NotSettled, SettleFirst
from chaos_ext._runner.sweep import run_history, shielded, sweep_run
from chaos_ext._runner.verdict import (
    EXIT_DEVIATED,
    EXIT_FAILED,
    EXIT_HELD,
    EXIT_INVALID,
    EXIT_UNSTEADY,
    exit_code_for,
    final_outcome,
    hypothesis_outcome,
    outcome_of,
    rollback_problems,
)
from chaos_ext._runner.windows import KIND as WINDOW_KIND
from chaos_ext._runner.windows import FaultWindows, pushgateway_url
from chaos_ext.controls.stop_conditions import AbortOnBreach
from chaos_ext.errors import ChaosExtError, LedgerError, RunRefused

__all__ = [
    "EXIT_DEVIATED",
    "EXIT_FAILED",
    "EXIT_HELD",
    "EXIT_INVALID",
    "EXIT_UNSTEADY",
    "RunOptions",
    "RunResult",
    "not_run",
    "outcome_of",
    "run_experiment",
]


@dataclass(frozen=True)
class RunOptions:
    """How to run: variables, where the journal goes, hypothesis strategy."""

    journal_path: Path
    config_vars: dict[str, Any] = field(default_factory=dict)
    secret_vars: dict[str, Any] = field(default_factory=dict, repr=False)
    hypothesis_strategy: str = "default"
    hypothesis_frequency: float = 1.0
    fail_fast: bool = False
    extra_handlers: tuple[RunEventHandler, ...] = ()
    settle_seconds: float = 0.0
    unprotected: tuple[str, ...] = ()  # controls --allow-missing-controls let the run go without
    recover_seconds: float = DEFAULT_RECOVER_S  # poll the hypothesis after the undo (0: off)
    watchdog_grace: float | None = None  # the faults' dead-man grace (None: env or default)


@dataclass(frozen=True)
class RunResult:
    """The journal of one run and what it means."""

    path: Path
    journal: dict[str, Any]
    outcome: str
    exit_code: int
    journal_path: Path
    sweep: list[UndoOutcome]
    hypothesis_outcome: str = ""  # the outcome with rollbacks aside (aborted, interrupted ...)


class _SecretCollector(RunEventHandler):  # type: ignore[misc]
    """Feeds the run's loaded secrets to the redactor as soon as chaoslib has them."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor

    def running(
        self,
        experiment: dict[str, Any],
        journal: dict[str, Any],
        configuration: dict[str, Any],
        secrets: dict[str, Any],
        schedule: Any,
        settings: Any,
    ) -> None:
        self.redactor.add(secret_values(secrets))


def _record_stop(journal: dict[str, Any]) -> None:
    """The first stop decides the status: a stop condition's is ``aborted``; a signal's or
    chaoslib's graceful exit's, even during the rollbacks or the sweep, ``interrupted``
    (the condition itself is in ``gameday.abort``). Every stop, with its time and phase,
    is in ``gameday.stops``. chaoslib's own "aborted" (an unexpected error escaped the
    method) is no stop condition: it is ``failed``."""
    cause = signals.stop_cause()
    if cause is not None:
        journal["status"] = "aborted" if cause == "stop-condition" else "interrupted"
    elif journal.get("status") == "aborted":
        journal["status"] = "failed"
        journal.setdefault("gameday", {}).setdefault(
            "error", "chaoslib stopped the method on an unexpected error (see the activity)"
        )
    journal.setdefault("gameday", {})["stops"] = _stop.stops()


def _settings() -> dict[str, Any]:
    settings: dict[str, Any] = dict(get_loaded_settings() or {})
    runtime = dict(settings.get("runtime") or {})
    runtime["rollbacks"] = {**(runtime.get("rollbacks") or {}), "strategy": "always"}
    settings["runtime"] = runtime
    return settings


def _runner(
    options: RunOptions, policy: RollbackPolicy, redactor: Redactor, console: Console
) -> Runner:
    """chaoslib's runner with gameday's handlers: rollback policy first, then signals,
    secrets, the caller's (controls guard, abort watch), settling and progress.

    The stop boundaries come first: a stop that came before a boundary is raised there,
    before any other handler (settling, the method's start) acts on it. The abort watch
    comes before settling, so a breach while settling stops the run at once."""
    schedule = Schedule(
        continuous_hypothesis_frequency=options.hypothesis_frequency,
        fail_fast=options.fail_fast,
    )
    runner = Runner(Strategy.from_string(options.hypothesis_strategy), schedule)
    handlers: list[RunEventHandler] = [StopBoundaries(), policy, _SecretCollector(redactor)]
    handlers += options.extra_handlers
    handlers.append(PhaseMarks(settling=options.settle_seconds > 0))  # before settling's
    if options.settle_seconds > 0:
        handlers.append(SettleFirst(options.settle_seconds, console, redact=redactor.text))
    handlers.append(ProgressPrinter(console, redactor))
    for handler in handlers:
        runner.register_event_handler(handler)
    return runner


def _set_run(run_id: str | None, watchdog_grace: float | None) -> None:
    """What the ledger records in this run's entries: its id and its faults' dead-man grace."""
    set_current_run_id(run_id)
    set_watchdog_grace(watchdog_grace)


def run_experiment(
    path: Path, experiment: dict[str, Any], options: RunOptions, ledger: Ledger, console: Console
) -> RunResult:
    """Run ``experiment`` and sweep its ledger entries, whatever happens. A stop that
    came before it (between two experiments of a batch) keeps it from starting."""
    _stop.begin_runs()
    if _stop.stopping():
        reason = f"{_stop.cause()} received before it started"
        return not_run(path, experiment, options.journal_path, reason)
    run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    redactor = Redactor(secret_values(options.secret_vars))
    journal: dict[str, Any] = initialize_run_journal(experiment)
    policy = RollbackPolicy()
    runner = _runner(options, policy, redactor, console)
    restore_signals = signals.install()  # SIGTERM/SIGINT: stop now, pauses included
    _set_run(run_id, options.watchdog_grace)
    outcomes: list[UndoOutcome] = []
    windows = _fault_windows(experiment, options, run_id, journal, console)
    if options.unprotected:
        journal.setdefault("gameday", {})["unprotected"] = list(options.unprotected)
    cache_activities(experiment)  # refs resolve as under `chaos run` (chaoslib's with_cache)
    try:
        _play(runner, experiment, options, journal, (policy, redactor, console))
    finally:
        _stop.disarm()
        if not policy.method_started:  # settling ran out, a refusal, a signal before it
            journal.setdefault("gameday", {}).setdefault("rollbacks_skipped", NOT_INJECTED)
            _stop.set_faults_closed()  # nothing was injected: a later firing changes nothing
        _record_stop(journal)
        with phase(journal, "sweep"):
            outcomes = _sweep(ledger, run_id, console, windows, journal)
        _record_stop(journal)  # a signal during the sweep is the run's stop too
        with phase(journal, "recovery"):
            outcomes += _recover(journal, (experiment, policy), options, ledger, run_id, console)
        _close_watches(options.extra_handlers)
        _record_stop(journal)
        _set_run(None, None)
        restore_signals()
        clear_cache()
    return _finish(path, journal, options, ledger, run_id, outcomes, redactor)


def _play(
    runner: Runner,
    experiment: dict[str, Any],
    options: RunOptions,
    journal: dict[str, Any],
    context: tuple[RollbackPolicy, Redactor, Console],
) -> None:
    """chaoslib runs the experiment; each way it can end is written into the journal."""
    policy, redactor, console = context
    try:
        with rollbacks_when_injected(policy):
            runner.run(
                experiment,
                settings=_settings(),
                # chaoslib pops keys from the configuration vars it is given: pass copies
                experiment_vars=(dict(options.config_vars), copy.deepcopy(options.secret_vars)),
                journal=journal,
            )
            if run_skipped_rollbacks(policy, experiment, journal, runner.event_registry):
                console.print("[bold yellow]⚠ ungraceful exit: gameday ran the rollbacks[/]")
    except RunRefused as exc:  # a safety control is not ready; nothing has run yet
        journal["status"] = "failed"
        journal.setdefault("gameday", {})["refused"] = str(exc)
        console.print(f"[red]✗ refused: {escape(redactor.text(str(exc)))}[/]", highlight=False)
        clean_up_refused_run(experiment)
    except NotSettled as exc:
        journal["status"] = "completed"  # as chaoslib records a before-method miss
        console.print(
            f"[bold yellow]⚠ unsteady: {escape(redactor.text(str(exc)))}[/]", highlight=False
        )
    except (KeyboardInterrupt, InterruptExecution, SystemExit) as exc:
        journal["status"] = "interrupted"
        cause = signals.stop_cause() or type(exc).__name__
        console.print(f"[bold yellow]⚠ interrupted ({cause}): rolling back[/]")
        if run_skipped_rollbacks(policy, experiment, journal, runner.event_registry):
            console.print("[bold yellow]⚠ gameday ran the rollbacks chaoslib skipped[/]")
    except ChaosException as exc:
        journal["status"] = "failed"
        journal.setdefault("gameday", {})["error"] = str(exc)
        console.print(f"[red]✗ {escape(redactor.text(str(exc)))}[/]", highlight=False)


def _sweep(
    ledger: Ledger,
    run_id: str,
    console: Console,
    windows: FaultWindows | None,
    journal: dict[str, Any],
) -> list[UndoOutcome]:
    """Undo what the run left open; then, if nothing of it is open any more, its faults are
    closed: a stop condition firing from here on is recorded and changes nothing."""
    _stop.set_phase("sweep")
    with shielded(console):
        outcomes = sweep_run(ledger, run_id, console, skip=(WINDOW_KIND,))
        if windows is not None:  # after the faults: their 0 is pushed, then the group goes
            windows.stop()
            journal.setdefault("gameday", {})["fault_windows"] = windows.record()
            outcomes += sweep_run(ledger, run_id, console, only=(WINDOW_KIND,))
    if all(o.ok for o in outcomes) and not _still_open(ledger, run_id):
        _stop.set_faults_closed()
    return outcomes


def _still_open(ledger: Ledger, run_id: str) -> bool:
    try:
        return bool(ledger.open_entries(run_id=run_id))
    except LedgerError:
        return True  # it cannot be shown closed


def _close_watches(handlers: tuple[RunEventHandler, ...]) -> None:
    """The stop-condition watches end after the recovery check (they watch every fault's
    whole life, and record what fires after the last undo)."""
    for handler in handlers:
        if isinstance(handler, AbortOnBreach):
            handler.close()


def _recover(
    journal: dict[str, Any],
    context: tuple[dict[str, Any], RollbackPolicy],
    options: RunOptions,
    ledger: Ledger,
    run_id: str,
    console: Console,
) -> list[UndoOutcome]:
    """The recovery check (runner.recovery). It measures the live system, not this run's
    undone faults: its probes see a run of their own (a load probe measures a fresh
    baseline), whose leftovers are swept here."""
    experiment, policy = context
    _stop.set_phase("recovery")
    set_current_run_id(f"{run_id}.recovery")
    check_recovery(
        journal,
        (experiment, policy.configuration, policy.secrets),
        run_history(ledger, run_id),
        options.recover_seconds,
        console,
        method_started=policy.method_started,
        stopped=signals.interrupted() or journal.get("status") in ("interrupted", "aborted"),
    )
    with shielded(console):
        return sweep_run(ledger, f"{run_id}.recovery", console)


def _fault_windows(
    experiment: dict[str, Any],
    options: RunOptions,
    run_id: str,
    journal: dict[str, Any],
    console: Console,
) -> FaultWindows | None:
    """Start publishing fault windows when a Pushgateway is configured (docs/reporting.md)."""
    try:
        url = pushgateway_url(options.config_vars, experiment)
        if url is None:
            return None
        windows = FaultWindows(url, run_id, str(experiment.get("title", "")))
        windows.start()
    except ChaosExtError as exc:
        journal.setdefault("gameday", {})["fault_windows"] = {"error": str(exc)}
        console.print(
            f"[yellow]fault windows not published: {escape(str(exc))}[/]", highlight=False
        )
        return None
    console.print(f"[cyan]fault windows → {escape(url)} (job=gameday, run_id={escape(run_id)})[/]")
    return windows


def _finish(
    path: Path,
    journal: dict[str, Any],
    options: RunOptions,
    ledger: Ledger,
    run_id: str,
    outcomes: list[UndoOutcome],
    redactor: Redactor,
) -> RunResult:
    entries = run_history(ledger, run_id)
    swept = [
        {
            "id": o.entry.id,
            "kind": o.entry.kind,
            "target": o.entry.target,
            "ok": o.ok,
            "note": o.note,
        }
        for o in outcomes
    ]
    journal.setdefault("end", journal.get("start"))
    hypothesis = hypothesis_outcome(journal)
    if hypothesis == "aborted":
        journal["status"] = "aborted"  # a stop condition, not an operator's signal
    problems = rollback_problems(journal, swept, entries)
    outcome = final_outcome(journal, hypothesis, problems)
    journal["gameday"] = {
        **journal.get("gameday", {}),
        "run_id": run_id,
        "experiment_path": str(path),
        "journal_path": str(options.journal_path),
        "outcome": outcome,
        "hypothesis_outcome": hypothesis,
        "exit_code": exit_code_for(outcome),
        "rollback_problems": problems,
        "ledger": entries,
        "sweep": swept,
    }
    journal["gameday"]["timeline"] = build_timeline(journal).as_dict()  # once: outputs read it
    exit_code = exit_code_for(outcome)
    clean = redactor.value(journal)
    write_journal(options.journal_path, clean)
    return RunResult(path, clean, outcome, exit_code, options.journal_path, outcomes, hypothesis)


def not_run(path: Path, experiment: dict[str, Any], journal_path: Path, reason: str) -> RunResult:
    """The result of an experiment a batch did not start (an earlier one was stopped):
    outcome ``not-run``, its journal written so that reports list it too."""
    journal: dict[str, Any] = initialize_run_journal(experiment)
    journal["status"] = None
    journal["end"] = journal["start"]
    journal["gameday"] = {
        "not_run": reason,
        "experiment_path": str(path),
        "journal_path": str(journal_path),
        "outcome": "not-run",
        "hypothesis_outcome": "not-run",
        "exit_code": exit_code_for("not-run"),
        "rollback_problems": [],
        "ledger": [],
        "sweep": [],
    }
    journal["gameday"]["timeline"] = build_timeline(journal).as_dict()
    clean = Redactor([]).value(journal)
    write_journal(journal_path, clean)
    code = exit_code_for("not-run")
    return RunResult(path, clean, "not-run", code, journal_path, [], "not-run")


def write_journal(path: Path, journal: dict[str, Any]) -> None:
    """Write a journal atomically (tmp file, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w") as handle:
        json.dump(journal, handle, indent=2, default=str)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)
