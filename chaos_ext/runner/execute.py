"""Run one experiment through chaostoolkit-lib, with rollbacks on every exit path.

chaoslib runs the experiment (hypothesis, method, rollbacks) with the rollback
strategy forced to ``always``; whatever way it ends (completed, deviated,
failed, aborted, SIGINT, SIGTERM), the ledger entries this run left open are
then undone, with further signals held off until that sweep is done.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaoslib.exceptions import ChaosException, InterruptExecution
from chaoslib.run import RunEventHandler, Runner, initialize_run_journal
from chaoslib.settings import get_loaded_settings
from chaoslib.types import Schedule, Strategy
from rich.console import Console

from chaos_ext.ledger import Ledger, UndoOutcome, set_current_run_id
from chaos_ext.runner import signals
from chaos_ext.runner.progress import ProgressPrinter
from chaos_ext.runner.redact import Redactor, secret_values
from chaos_ext.runner.sweep import run_history, shielded, sweep_run

__all__ = [
    "EXIT_DEVIATED",
    "EXIT_FAILED",
    "EXIT_HELD",
    "EXIT_INVALID",
    "RunOptions",
    "RunResult",
    "outcome_of",
    "run_experiment",
]

EXIT_HELD = 0
EXIT_DEVIATED = 1
EXIT_FAILED = 2
EXIT_INVALID = 3

_EXIT_BY_OUTCOME = {
    "held": EXIT_HELD,
    "deviated": EXIT_DEVIATED,
    "failed": EXIT_FAILED,
    "aborted": EXIT_FAILED,
    "interrupted": EXIT_FAILED,
}


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


@dataclass(frozen=True)
class RunResult:
    """The journal of one run and what it means."""

    path: Path
    journal: dict[str, Any]
    outcome: str
    exit_code: int
    journal_path: Path
    sweep: list[UndoOutcome]


def outcome_of(journal: dict[str, Any]) -> str:
    """held | deviated | failed | aborted | interrupted, from a chaoslib journal.

    A failed action in the method counts as ``failed`` (the fault was not
    injected as designed), and a hypothesis not met *before* the method counts
    as ``deviated`` (the system was not in steady state).
    """
    status = journal.get("status")
    if status in ("failed", "aborted", "interrupted"):
        return str(status)
    if any(
        run.get("status") == "failed" and run.get("activity", {}).get("type") == "action"
        for run in journal.get("run") or []
    ):
        return "failed"
    before = (journal.get("steady_states") or {}).get("before")
    if journal.get("deviated") or (before is not None and not before.get("steady_state_met")):
        return "deviated"
    return "held"


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


class _SigtermInterrupts(RunEventHandler):  # type: ignore[misc]
    """Replaces chaoslib's SIGTERM handler, once chaoslib has installed it, by ours."""

    def started(self, experiment: dict[str, Any], journal: dict[str, Any]) -> None:
        signal.signal(signal.SIGTERM, signals.interrupt)


def _settings() -> dict[str, Any]:
    settings: dict[str, Any] = dict(get_loaded_settings() or {})
    runtime = dict(settings.get("runtime") or {})
    runtime["rollbacks"] = {**(runtime.get("rollbacks") or {}), "strategy": "always"}
    settings["runtime"] = runtime
    return settings


def run_experiment(
    path: Path, experiment: dict[str, Any], options: RunOptions, ledger: Ledger, console: Console
) -> RunResult:
    """Run ``experiment`` and sweep its ledger entries, whatever happens."""
    run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    redactor = Redactor(secret_values(options.secret_vars))
    journal: dict[str, Any] = initialize_run_journal(experiment)
    schedule = Schedule(
        continuous_hypothesis_frequency=options.hypothesis_frequency,
        fail_fast=options.fail_fast,
    )
    runner = Runner(Strategy.from_string(options.hypothesis_strategy), schedule)
    runner.register_event_handler(_SigtermInterrupts())
    runner.register_event_handler(_SecretCollector(redactor))
    runner.register_event_handler(ProgressPrinter(console, redactor))
    for handler in options.extra_handlers:
        runner.register_event_handler(handler)
    restore_signals = signals.install()  # SIGTERM/SIGINT: stop now, pauses included
    set_current_run_id(run_id)
    outcomes: list[UndoOutcome] = []
    try:
        runner.run(
            experiment,
            settings=_settings(),
            # chaoslib pops keys from the configuration vars it is given: pass copies
            experiment_vars=(dict(options.config_vars), copy.deepcopy(options.secret_vars)),
            journal=journal,
        )
    except (KeyboardInterrupt, InterruptExecution, SystemExit) as exc:
        journal["status"] = "interrupted"
        console.print(f"[bold yellow]⚠ interrupted ({type(exc).__name__}): rolling back[/]")
    except ChaosException as exc:
        journal["status"] = "failed"
        journal.setdefault("gameday", {})["error"] = str(exc)
        console.print(f"[red]✗ {redactor.text(str(exc))}[/]", highlight=False)
    finally:
        with shielded(console):
            outcomes = sweep_run(ledger, run_id, console)
            set_current_run_id(None)
            restore_signals()
    return _finish(path, journal, options, ledger, run_id, outcomes, redactor)


def _finish(
    path: Path,
    journal: dict[str, Any],
    options: RunOptions,
    ledger: Ledger,
    run_id: str,
    outcomes: list[UndoOutcome],
    redactor: Redactor,
) -> RunResult:
    outcome = outcome_of(journal)
    exit_code = _EXIT_BY_OUTCOME[outcome]
    if any(not o.ok for o in outcomes):
        exit_code = EXIT_FAILED
    journal.setdefault("end", journal.get("start"))
    journal["gameday"] = {
        **journal.get("gameday", {}),
        "run_id": run_id,
        "experiment_path": str(path),
        "outcome": outcome,
        "exit_code": exit_code,
        "ledger": run_history(ledger, run_id),
        "sweep": [
            {"id": o.entry.id, "kind": o.entry.kind, "target": o.entry.target, "ok": o.ok,
             "note": o.note}
            for o in outcomes
        ],
    }  # fmt: skip
    clean = redactor.value(journal)
    write_journal(options.journal_path, clean)
    return RunResult(path, clean, outcome, exit_code, options.journal_path, outcomes)


def write_journal(path: Path, journal: dict[str, Any]) -> None:
    """Write a journal atomically (tmp file, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w") as handle:
        json.dump(journal, handle, indent=2, default=str)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)
