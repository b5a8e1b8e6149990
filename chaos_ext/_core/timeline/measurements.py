"""Every measured value of a run, with its window (pure): :func:`measurements_of`.

The checks of the steady-state hypothesis (chaoslib's before, during and after;
the recovery's, ``gameday.recovery.checks``) and the probes of the method that
return a figure (a number or a bool), each with the figure its tolerance judges
(:mod:`.figures`) and the window :func:`~.model.window_at` names from what was
open at its time (the end of the probe: the value is "as of" then).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from chaos_ext._core.timeline.figures import figure_of, figure_text
from chaos_ext._core.timeline.journal import epoch, error_line, mappings, number, probe_runs
from chaos_ext._core.timeline.model import EntrySpan, Measurement, window_at
from chaos_ext._core.timeline.texts import journal_vars

__all__ = ["measurements_of"]


def _check_runs(journal: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any], Any]]:
    """``(phase, run, tolerance)`` of every check and method probe, in the journal's order."""
    experiment = journal.get("experiment") or {}
    hypothesis = experiment.get("steady-state-hypothesis") or {}
    tolerances = {
        str(p.get("name")): p.get("tolerance") for p in mappings(hypothesis.get("probes"))
    }
    for phase in ("before", "during", "after"):
        for run in probe_runs(journal, phase):
            activity = run.get("activity") or {}
            name = str(activity.get("name", "?"))
            yield phase, run, activity.get("tolerance", tolerances.get(name))
    for run in mappings(journal.get("run")):
        if (run.get("activity") or {}).get("type") == "probe":
            yield "method", run, None


def _recovery(journal: Mapping[str, Any], entries: Sequence[EntrySpan]) -> Iterator[Measurement]:
    recovery = (journal.get("gameday") or {}).get("recovery")
    checks = recovery.get("checks") if isinstance(recovery, Mapping) else None
    for check in mappings(checks):
        at = epoch(check.get("at"))
        if at is None:
            continue
        met = check.get("tolerance_met")
        yield Measurement(
            probe=str(check.get("probe", "?")),
            window=window_at(at, "recovery", entries),
            at=at,
            value=number(check.get("value")),
            tolerance_met=met if isinstance(met, bool) else None,
            phase="recovery",
            text=str(check.get("text", "")),
            error=str(check.get("error", "")),
        )


def measurements_of(
    journal: Mapping[str, Any], entries: Sequence[EntrySpan]
) -> tuple[Measurement, ...]:
    """The run's measurements in time order (module docstring)."""
    values = journal_vars(journal)
    found = list(_recovery(journal, entries))
    for phase, run, tolerance in _check_runs(journal):
        at = epoch(run.get("end")) or epoch(run.get("start"))
        if at is None:
            continue
        failed = run.get("status") == "failed"
        output = None if failed else run.get("output")
        value = figure_of(output, tolerance, values)
        if phase == "method" and value is None:
            continue  # a method probe without a figure (a range query's samples): a series
        met = run.get("tolerance_met")
        found.append(
            Measurement(
                probe=str((run.get("activity") or {}).get("name", "?")),
                window=window_at(at, phase, entries),
                at=at,
                value=value,
                tolerance_met=met if isinstance(met, bool) else None,
                phase=phase,
                text="" if failed else figure_text(output, tolerance, values),
                error=error_line(run) if failed else "",
            )
        )
    return tuple(sorted(found, key=lambda m: m.at))
