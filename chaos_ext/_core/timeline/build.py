"""The timeline of one run, built from its journal (pure): :func:`build_timeline`.

The runner builds it once, at the end of the run, and stores it as
``gameday.timeline``; :func:`timeline_of` reads it back (or, for a journal
written before gameday recorded timelines, rebuilds it, with a note).

What it reads:

* the runner's precise marks when present: ``gameday.phases`` (each phase's
  start and end, and each activity's pauses, from
  :mod:`chaos_ext._runner.phases`) and ``gameday.stops`` (signals and stop
  conditions); without them, chaoslib's own times (each activity run's
  ``start``/``end``, the steady states', the rollbacks') and
  ``gameday.settle`` / ``gameday.recovery`` / ``gameday.abort.fired``;
* ``gameday.ledger``: each entry's ``created_at`` (on) and ``closed_at`` (off);
* the measurements: every check of the steady-state hypothesis (before, during,
  after; the recovery's, ``gameday.recovery.checks``) and every probe of the
  method with a figure, each with its window (:func:`~.model.window_at`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from chaos_ext._core.timeline.journal import epoch, mappings, number, probe_runs
from chaos_ext._core.timeline.measurements import measurements_of
from chaos_ext._core.timeline.model import (
    PHASES,
    ActivitySpan,
    EntrySpan,
    Span,
    Stop,
    Timeline,
    role_of,
    timeline_from_dict,
)

__all__ = ["ACTIONS_KIND", "REBUILT_NOTE", "build_timeline", "timeline_of"]

ACTIONS_KIND = "experiment-actions"
"""The kind of the one synthetic fault entry of a run whose faults are not in the ledger."""
REBUILT_NOTE = (
    "this journal was written before gameday recorded timelines: when each phase ran "
    "was rebuilt from Chaos Toolkit's activity times"
)


def _span_of(runs: Sequence[Mapping[str, Any]], name: str) -> Span | None:
    starts = [t for r in runs if (t := epoch(r.get("start"))) is not None]
    ends = [t for r in runs if (t := epoch(r.get("end"))) is not None]
    if not starts:
        return None
    return Span(name, min(starts), max(ends) if ends else None)


def _recorded_phases(gameday: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [p for p in mappings(gameday.get("phases")) if epoch(p.get("start")) is not None]


def _phases(journal: Mapping[str, Any], recorded: list[Mapping[str, Any]]) -> tuple[Span, ...]:
    """The run's phases, from the runner's marks, else rebuilt from chaoslib's times."""
    if recorded:
        marks = [p for p in recorded if p.get("name") in PHASES]
        return tuple(
            Span(str(p["name"]), epoch(p["start"]) or 0.0, epoch(p.get("end"))) for p in marks
        )
    return tuple(_rebuilt_phases(journal))


def _rebuilt_phases(journal: Mapping[str, Any]) -> Iterator[Span]:
    gameday = journal.get("gameday") or {}
    before = _span_of(probe_runs(journal, "before"), "before")
    settle = gameday.get("settle")
    if isinstance(settle, Mapping) and before is not None:
        waited = number(settle.get("waited_s")) or 0.0
        yield Span("settle", before.start - waited, before.start)
    if before is not None:
        yield before
    method = _span_of(mappings(journal.get("run")), "method")
    after = _span_of(probe_runs(journal, "after"), "after")
    rollbacks = _span_of(mappings(journal.get("rollbacks")), "rollbacks")
    if method is not None:
        following = after or rollbacks
        yield Span("method", method.start, following.start if following else method.end)
    yield from (span for span in (after, rollbacks) if span is not None)
    recovery = _rebuilt_recovery(gameday.get("recovery"), rollbacks)
    if recovery is not None:
        yield recovery


def _rebuilt_recovery(recovery: Any, rollbacks: Span | None) -> Span | None:
    if not isinstance(recovery, Mapping) or recovery.get("checked") is not True:
        return None
    undone = epoch(recovery.get("undone_at"))
    took = number(recovery.get("time_to_recover_s" if recovery.get("recovered") else "seconds"))
    if undone is None or took is None:
        return None
    start = max(undone, rollbacks.end or undone) if rollbacks else undone
    return Span("recovery", start, max(start, undone + took))


def _pauses(recorded: list[Mapping[str, Any]]) -> dict[tuple[str, str, int], tuple[float, float]]:
    """``(activity, before|after, n-th run of that name) -> (start, end)`` of recorded pauses."""
    found: dict[tuple[str, str, int], tuple[float, float]] = {}
    for mark in recorded:
        if mark.get("name") != "pause" or epoch(mark.get("end")) is None:
            continue
        which, activity = str(mark.get("which", "")), str(mark.get("activity", ""))
        n = sum(1 for key in found if key[:2] == (activity, which))
        found[(activity, which, n)] = (epoch(mark["start"]) or 0.0, epoch(mark["end"]) or 0.0)
    return found


def _declared_pause(activity: Mapping[str, Any], which: str) -> float | None:
    pauses = activity.get("pauses")
    return number(pauses.get(which)) if isinstance(pauses, Mapping) else None


def _activities(
    journal: Mapping[str, Any], recorded: list[Mapping[str, Any]], stops: Sequence[Stop]
) -> tuple[ActivitySpan, ...]:
    pauses = _pauses(recorded)
    seen: dict[str, int] = {}
    found: list[ActivitySpan] = []
    for phase, key in (("method", "run"), ("rollbacks", "rollbacks")):
        runs = mappings(journal.get(key))
        for i, run in enumerate(runs):
            activity = run.get("activity") or {}
            name = str(activity.get("name", "?"))
            start, end = epoch(run.get("start")), epoch(run.get("end"))
            if start is None:
                continue
            n = seen[name] = seen.get(name, -1) + 1
            cut = number(run.get("gameday_cut_short_after_s"))  # the runner saw a stop end it
            following = epoch(runs[i + 1].get("start")) if i + 1 < len(runs) else None
            found.append(
                ActivitySpan(
                    name=name,
                    phase=phase,
                    type=str(activity.get("type", "action")),
                    start=start,
                    end=end,
                    status="cut-short" if cut is not None else str(run.get("status", "")),
                    cut_short_after_s=cut,
                    pause_before=pauses.get((name, "before", n))
                    or _rebuilt_before(activity, start),
                    pause_after=pauses.get((name, "after", n))
                    or _rebuilt_after(activity, end, following),
                )
            )
    return tuple(_cut_short(a, stops) for a in found)


def _rebuilt_before(activity: Mapping[str, Any], start: float) -> tuple[float, float] | None:
    seconds = _declared_pause(activity, "before")
    return (start - seconds, start) if seconds else None


def _rebuilt_after(
    activity: Mapping[str, Any], end: float | None, following: float | None
) -> tuple[float, float] | None:
    seconds = _declared_pause(activity, "after")
    if not seconds or end is None:
        return None
    return (end, min(end + seconds, following) if following is not None else end + seconds)


def _cut_short(activity: ActivitySpan, stops: Sequence[Stop]) -> ActivitySpan:
    """An activity a stop ended while it ran: ``cut-short``, with how long it ran (from
    the run's own record, else from the stop's time)."""
    if activity.status == "cut-short":
        return activity
    end = activity.end
    for stop in stops:
        inside = activity.start <= stop.at and (end is None or stop.at <= end)
        if inside and "stopped" in stop.effect:
            ran = (end if end is not None else stop.at) - activity.start
            return replace(activity, status="cut-short", cut_short_after_s=round(ran, 3))
    return activity


def _ledger_entries(gameday: Mapping[str, Any]) -> list[EntrySpan]:
    found = []
    for entry in mappings(gameday.get("ledger")):
        on = epoch(entry.get("created_at"))
        if on is None:
            continue
        kind = str(entry.get("kind", "?"))
        off = epoch(entry.get("closed_at")) if entry.get("state") != "open" else None
        found.append(
            EntrySpan(
                str(entry.get("id", "")), kind, str(entry.get("target", "")), role_of(kind), on, off
            )
        )
    return found


def _unaccounted_actions(journal: Mapping[str, Any], ids: set[str]) -> list[tuple[float, str]]:
    """Method actions that ran and returned no ledger id of this run: ``(start, name)``."""
    found = []
    for run in mappings(journal.get("run")):
        activity = run.get("activity") or {}
        start = epoch(run.get("start"))
        if activity.get("type") != "action" or start is None:
            continue
        output = run.get("output")
        if isinstance(output, Mapping) and str(output.get("ledger_id", "")) in ids:
            continue
        found.append((start, str(activity.get("name", "?"))))
    return sorted(found)


def _entries(
    journal: Mapping[str, Any], phases: Sequence[Span], end: float
) -> tuple[EntrySpan, ...]:
    """The ledger's entries, plus the synthetic ``experiment-actions`` fault of a run whose
    method has actions but no fault in the ledger (on at the first such action, off at the
    end of the rollbacks: its faults are open until they are rolled back)."""
    entries = _ledger_entries(journal.get("gameday") or {})
    if any(e.role == "fault" for e in entries):
        return tuple(entries)
    actions = _unaccounted_actions(journal, {e.id for e in entries})
    if not actions:
        return tuple(entries)
    rollbacks = next((p for p in phases if p.name == "rollbacks"), None)
    ends = [epoch(r.get("end")) for r in mappings(journal.get("rollbacks"))]
    off = (rollbacks.end if rollbacks else None) or max(
        [e for e in ends if e is not None], default=end
    )
    names = ", ".join(dict.fromkeys(name for _, name in actions))
    synthetic = EntrySpan(ACTIONS_KIND, ACTIONS_KIND, names, "fault", actions[0][0], off)
    return (*entries, synthetic)


def _notes(entries: Sequence[EntrySpan]) -> tuple[str, ...]:
    synthetic = [e for e in entries if e.kind == ACTIONS_KIND]
    return tuple(
        f"no fault of this run is in the ledger: its actions ({e.target}) count as faults "
        "from the first one's start to the end of the rollbacks"
        for e in synthetic
    )


def _stops(gameday: Mapping[str, Any]) -> tuple[Stop, ...]:
    recorded = mappings(gameday.get("stops"))
    if recorded:
        return tuple(
            Stop(
                cause=str(s.get("cause", "?")),
                at=epoch(s.get("at")) or 0.0,
                effect=str(s.get("effect", "")),
                fired_at=epoch(s.get("fired_at")),
                what=str(s.get("what", "")),
                phase=str(s.get("phase", "")),
            )
            for s in recorded
            if epoch(s.get("at")) is not None
        )
    abort = gameday.get("abort")
    fired = abort.get("fired") if isinstance(abort, Mapping) else None
    if not isinstance(fired, Mapping):
        return ()
    at = epoch(fired.get("at_unix")) or epoch(fired.get("at"))
    if at is None:
        return ()
    alert = fired.get("alert") if isinstance(fired.get("alert"), Mapping) else {}
    return (
        Stop(
            cause="stop-condition",
            at=at,
            effect="stopped the run",
            fired_at=epoch(alert.get("fired_at_unix")) if alert else None,
            what=str(fired.get("condition", "")),
        ),
    )


def build_timeline(journal: Mapping[str, Any]) -> Timeline:
    """The run's timeline (module docstring); never raises on a journal it can read."""
    gameday = journal.get("gameday") or {}
    gameday = gameday if isinstance(gameday, Mapping) else {}
    recorded = _recorded_phases(gameday)
    phases = _phases(journal, recorded)
    start = epoch(journal.get("start"))
    ends = [epoch(journal.get("end")), *(p.end for p in phases)]
    end = max([e for e in ends if e is not None], default=start or 0.0)
    start = min([start or end, *(p.start for p in phases)])
    stops = _stops(gameday)
    entries = _entries(journal, phases, end)
    measurements = measurements_of(journal, entries)
    return Timeline(
        start=start,
        end=max([end, *(m.at for m in measurements)]),
        phases=phases,
        activities=_activities(journal, recorded, stops),
        entries=entries,
        stops=stops,
        measurements=measurements,
        source="recorded",
        notes=_notes(entries),
    )


def timeline_of(journal: Mapping[str, Any]) -> Timeline:
    """The timeline the run recorded (``gameday.timeline``); for an older journal (or a
    plain ``chaos run`` one) the one :func:`build_timeline` rebuilds, source ``rebuilt``,
    with :data:`REBUILT_NOTE`."""
    gameday = journal.get("gameday") or {}
    stored = gameday.get("timeline") if isinstance(gameday, Mapping) else None
    if isinstance(stored, Mapping):
        try:
            return timeline_from_dict(stored)
        except (KeyError, TypeError, ValueError):
            pass  # damaged: rebuilt below, and said so
    built = build_timeline(journal)
    return replace(built, source="rebuilt", notes=(*built.notes, REBUILT_NOTE))
