"""Run an envelope search: the whole experiment at each magnitude, one run at a time.

Each run goes through :func:`chaos_ext._runner.execute.run_experiment`, the
runner ``gameday run`` uses: the fault ledger is written before each fault,
rollbacks run on every exit path and the run's ledger entries are swept, its
abort conditions are watched, and with ``settle_seconds`` the hypothesis must
hold again before the next magnitude is injected. Which magnitude comes next
is decided by the pure core (:mod:`chaos_ext._products.envelope.search`).

``envelope.json`` is rewritten atomically after every run, so a killed search
still shows what it found; every run's journal is kept under ``runs/``.
Ctrl-C or SIGTERM during a run interrupts that run (it rolls back) and ends the
search; between runs it ends the search at once (nothing is injected then).
"""

from __future__ import annotations

import dataclasses
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from chaoslib.run import RunEventHandler
from rich.console import Console
from rich.markup import escape

from chaos_ext._core.ledger import Ledger
from chaos_ext._products.envelope.document import document, hypothesis_values, observations_of
from chaos_ext._products.envelope.search import Step, fmt, next_step
from chaos_ext._products.envelope.spec import EnvelopeSettings, apply_magnitude, rendered
from chaos_ext._runner.execute import RunOptions, run_experiment, write_journal
from chaos_ext._runner.signals import handled
from chaos_ext._runner.verdict import unsteady_reason

__all__ = ["EnvelopeResult", "run_envelope"]


@dataclass(frozen=True)
class EnvelopeResult:
    """Where envelope.json is, what it says, and the command's exit code."""

    path: Path
    document: dict[str, Any]
    exit_code: int


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"{signal.Signals(signum).name} received")


def _journal_name(index: int, settings: EnvelopeSettings, magnitude: float) -> str:
    return f"{index:02d}-{settings.vary.argument}-{fmt(magnitude)}.json"


def _record(
    index: int,
    step: Step,
    settings: EnvelopeSettings,
    outcome: str,
    exit_code: int,
    journal: Mapping[str, Any],
    journal_rel: str,
    started: float,
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "run": index,
        "magnitude": step.magnitude,
        "value": rendered(settings, step.magnitude),
        "phase": step.phase,
        "why": step.why,
        "outcome": outcome,
        "exit_code": exit_code,
        "journal": journal_rel,
        "started": round(started, 3),
        "duration_s": round(time.time() - started, 2),
        "hypothesis": hypothesis_values(journal),
    }
    if outcome == "unsteady":
        record["reason"] = unsteady_reason(journal)
    recovery = (journal.get("gameday") or {}).get("recovery") or {}
    if recovery.get("checked"):  # how fast the system came back at this magnitude
        record["time_to_recover_s"] = recovery.get("time_to_recover_s")
    error = (journal.get("gameday") or {}).get("error")
    if error:
        record["reason"] = str(error)
    return record


_CRASHED = (
    "the runner raised an error during this run: its faults may not all be undone; "
    "check `gameday ledger` and run `gameday rollback`"
)


def _crashed(
    index: int, step: Step, settings: EnvelopeSettings, exc: Exception, started: float
) -> dict[str, Any]:
    """The record of a run whose runner raised: failed, never counted."""
    return {
        "run": index,
        "magnitude": step.magnitude,
        "value": rendered(settings, step.magnitude),
        "phase": step.phase,
        "why": step.why,
        "outcome": "failed",
        "exit_code": 2,
        "journal": "",
        "started": round(started, 3),
        "duration_s": round(time.time() - started, 2),
        "hypothesis": [],
        "reason": f"{type(exc).__name__}: {exc}",
    }


class _Search:
    """The loop's state: the runs so far and where they are written."""

    def __init__(
        self, path: Path, experiment: dict[str, Any], settings: EnvelopeSettings, out: Path
    ) -> None:
        self.path = path
        self.experiment = experiment
        self.settings = settings
        self.out = out
        self.runs: list[dict[str, Any]] = []
        self.started = time.time()

    def save(self, status: str, ended: float | None = None, note: str = "") -> dict[str, Any]:
        doc = document(
            self.settings,
            str(self.path),
            self.experiment,
            self.runs,
            status,
            self.started,
            ended,
            note,
        )
        write_journal(self.out / "envelope.json", doc)
        return doc


def _announce(
    console: Console, index: int, worst: int, step: Step, settings: EnvelopeSettings
) -> None:
    value = rendered(settings, step.magnitude)
    console.print(
        f"[bold magenta]◆ envelope run {index} (at most {worst})[/]: "
        f"{escape(settings.vary.argument)}={escape(str(value))} [dim]({escape(step.why)})[/]",
        highlight=False,
    )


def run_envelope(
    path: Path,
    experiment: dict[str, Any],
    settings: EnvelopeSettings,
    base: RunOptions,
    ledger: Ledger,
    console: Console,
    out: Path,
    handlers: Callable[[], tuple[RunEventHandler, ...]] = tuple,
) -> EnvelopeResult:
    """Search the breaking point; write ``out/envelope.json`` and ``out/runs/*.json``."""
    search = _Search(path, experiment, settings, out)
    search.save("running")
    worst = min(settings.worst_case_runs, settings.search.max_runs)
    note = ""
    with handled(_interrupt, (signal.SIGTERM,)):  # between runs: no fault is injected
        try:
            while isinstance(
                step := next_step(settings.search, observations_of(search.runs)), Step
            ):
                index = len(search.runs) + 1
                _announce(console, index, worst, step, settings)
                name = _journal_name(index, settings, step.magnitude)
                options = dataclasses.replace(
                    base,
                    journal_path=out / "runs" / name,
                    settle_seconds=settings.settle_seconds,
                    extra_handlers=(*base.extra_handlers, *handlers()),
                )
                started = time.time()
                try:
                    result = run_experiment(
                        path,
                        apply_magnitude(experiment, settings, step.magnitude, index),
                        options,
                        ledger,
                        console,
                    )
                except Exception as exc:  # noqa: BLE001 - recorded, the search stops, caller exits 2
                    search.runs.append(_crashed(index, step, settings, exc, started))
                    note = _CRASHED
                    console.print(f"[bold red]✗ {escape(note)}: {escape(repr(exc))}[/]")
                    break
                search.runs.append(
                    _record(
                        index,
                        step,
                        settings,
                        result.outcome,
                        result.exit_code,
                        result.journal,
                        f"runs/{name}",
                        started,
                    )
                )
                console.print(f"  → {result.outcome} at {fmt(step.magnitude)}", highlight=False)
                search.save("running")
        except KeyboardInterrupt as exc:
            note = f"interrupted between runs ({exc or 'SIGINT'}); no fault was injected then"
            console.print(f"[bold yellow]⚠ {escape(note)}[/]")
    done = next_step(settings.search, observations_of(search.runs)) is None
    status = (
        "stopped"
        if note == _CRASHED
        else "interrupted"
        if note
        else "finished"
        if done
        else "stopped"
    )
    doc = search.save(status, time.time(), note)
    code = int(doc["result"]["exit_code"])
    return EnvelopeResult(out / "envelope.json", doc, code)
