"""The timeline's data model: spans, activities, ledger entries, stops, measurements.

Pure data and the rule that names a measurement's window (:func:`window_at`);
the package docstring (:mod:`chaos_ext._core.timeline`) says what each part is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = [
    "BOOKKEEPING_KINDS",
    "LOAD_KINDS",
    "PHASES",
    "WINDOWS",
    "WINDOW_PHRASES",
    "WINDOW_WORDS",
    "ActivitySpan",
    "EntrySpan",
    "Measurement",
    "Span",
    "Stop",
    "Timeline",
    "role_of",
    "timeline_from_dict",
    "window_at",
]

VERSION = 1
PHASES = ("settle", "before", "method", "after", "rollbacks", "sweep", "recovery")
"""The run's phases in order; ``after`` is Chaos Toolkit's steady-state-after."""

Window = Literal["before", "during", "faults-on", "after-undo", "no-faults"]
WINDOWS: tuple[Window, ...] = ("before", "during", "faults-on", "after-undo", "no-faults")
WINDOW_WORDS: Mapping[str, str] = {
    "before": "before (baseline)",
    "during": "during the faults",
    "faults-on": "with faults on (steady state after the method, before the undo)",
    "after-undo": "after the undo (recovery)",
    "no-faults": "during and after the method (nothing was injected)",
}
"""The words every output uses for a window (report columns, console, compare)."""
WINDOW_PHRASES: Mapping[str, str] = {
    "before": "before the faults",
    "during": "during the faults",
    "faults-on": "with the faults on",
    "after-undo": "after the undo",
    "no-faults": "during and after the method",
}
"""A window at the end of a sentence ("held before the faults and after the undo")."""

LOAD_KINDS = frozenset({"http-load"})
"""Ledger kinds that measure the system (traffic), never count as fault time."""
BOOKKEEPING_KINDS = frozenset({"fault-window"})
"""Ledger kinds that are gameday's own records (the fault-window publisher)."""

Role = Literal["fault", "load", "bookkeeping"]


def role_of(kind: str) -> Role:
    """What a ledger entry of ``kind`` is on the timeline."""
    if kind in LOAD_KINDS:
        return "load"
    if kind in BOOKKEEPING_KINDS:
        return "bookkeeping"
    return "fault"


@dataclass(frozen=True)
class Span:
    """Something that started and (``end`` None: never) ended, in epoch seconds."""

    name: str
    start: float
    end: float | None

    def covers(self, at: float) -> bool:
        return self.start <= at and (self.end is None or at <= self.end)


@dataclass(frozen=True)
class ActivitySpan:
    """One activity run: its phase, its own time, its pauses, and how it ended."""

    name: str
    phase: str
    type: str  # "action" | "probe"
    start: float
    end: float | None
    status: str  # chaoslib's, or "cut-short" when a stop ended it
    pause_before: tuple[float, float] | None = None
    pause_after: tuple[float, float] | None = None
    cut_short_after_s: float | None = None  # how long it ran before a stop ended it


@dataclass(frozen=True)
class EntrySpan:
    """A ledger entry of the run: on (recorded) and off (closed; None: still open)."""

    id: str
    kind: str
    target: str
    role: Role
    on: float
    off: float | None


@dataclass(frozen=True)
class Stop:
    """A signal or a stop condition: when gameday saw it, and what it did."""

    cause: str  # "stop-condition" | "SIGTERM" | "SIGINT" | "graceful-exit" | "ungraceful-exit"
    at: float  # when gameday saw it
    effect: str  # "stopped the run" | "noted: already stopping" | "recorded only: ..."
    fired_at: float | None = None  # a stop condition: when Prometheus says it fired
    what: str = ""  # the condition or alert, or the signal's name
    phase: str = ""  # the phase running when it came


@dataclass(frozen=True)
class Measurement:
    """One value of a hypothesis probe, with the window it belongs to."""

    probe: str
    window: str  # one of WINDOWS
    at: float
    value: float | None  # the hypothesis' own figure, the number compared with the tolerance
    tolerance_met: bool | None
    phase: str = ""  # who took it: settle/before/during/after (chaoslib), method, recovery
    text: str = ""  # the figure as outputs show it ("error_ratio 0.973", "true", "12.5")
    error: str = ""  # the probe's error when it could not measure (value None)

    @property
    def hypothesis(self) -> bool:
        """A check of the steady-state hypothesis (not a probe of the method)."""
        return self.phase != "method"


@dataclass(frozen=True)
class Timeline:
    """The run, once: phases, activities, ledger entries, stops, measurements."""

    start: float
    end: float
    phases: tuple[Span, ...] = ()
    activities: tuple[ActivitySpan, ...] = ()
    entries: tuple[EntrySpan, ...] = ()
    stops: tuple[Stop, ...] = ()
    measurements: tuple[Measurement, ...] = ()
    source: str = "recorded"  # "recorded" by the runner, or "rebuilt" from an older journal
    notes: tuple[str, ...] = field(default=())

    def phase(self, name: str) -> Span | None:
        return next((p for p in self.phases if p.name == name), None)

    def faults(self) -> tuple[EntrySpan, ...]:
        return tuple(e for e in self.entries if e.role == "fault")

    def loads(self) -> tuple[EntrySpan, ...]:
        return tuple(e for e in self.entries if e.role == "load")

    def fault_window(self) -> Span | None:
        """From the first fault on to the last fault off (None: no fault was recorded)."""
        faults = self.faults()
        if not faults:
            return None
        ends = [f.off for f in faults]
        end = None if any(e is None for e in ends) else max(e for e in ends if e is not None)
        return Span("faults", min(f.on for f in faults), end)

    def fault_open_at(self, at: float) -> bool:
        return any(Span(f.kind, f.on, f.off).covers(at) for f in self.faults())

    def window(self, name: str) -> Span | None:
        """The time span of a window: before = run start to the first fault (or the method);
        faults-on/during = the fault window; after-undo = last undo to the recovery's end."""
        faults = self.fault_window()
        method = self.phase("method")
        if name == "before":
            first = faults.start if faults else (method.start if method else None)
            return Span(name, self.start, first) if first is not None else None
        if name in ("during", "faults-on"):
            return Span(name, faults.start, faults.end) if faults else None
        if name == "no-faults":
            return None if faults or method is None else Span(name, method.start, self.end)
        if name == "after-undo":
            if faults is None or faults.end is None:
                return None
            recovery = self.phase("recovery")
            return Span(name, faults.end, recovery.end if recovery else self.end)
        raise ValueError(f"unknown window {name!r}; one of {WINDOWS}")

    def in_window(self, name: str) -> tuple[Measurement, ...]:
        return tuple(m for m in self.measurements if m.window == name)

    def as_dict(self) -> dict[str, Any]:
        return {"version": VERSION, **asdict(self)}


def window_at(at: float, phase: str, entries: Iterable[EntrySpan]) -> str:
    """The window of a measurement taken at ``at`` by ``phase`` (chaoslib's ``before``,
    ``during``, ``after``, a method ``probe``; gameday's ``settle``, ``recovery``).

    The rule is over what was open then, not over the phase: a check while a fault
    was open is ``during`` (continuous checks and method probes) or ``faults-on``
    (the steady state after the method); before the first fault ``before``; after
    the last undo ``after-undo``. A run that recorded no fault has ``before`` and
    ``no-faults`` only."""
    faults = [f for f in entries if f.role == "fault"]
    if not faults:
        return "before" if phase in ("settle", "before") else "no-faults"
    if any(Span(f.kind, f.on, f.off).covers(at) for f in faults):
        return "during" if phase in ("during", "probe", "method") else "faults-on"
    if at < min(f.on for f in faults):
        return "before"
    return "after-undo"


def _span(data: Mapping[str, Any]) -> Span:
    return Span(str(data["name"]), float(data["start"]), _opt(data.get("end")))


def _opt(value: Any) -> float | None:
    return None if value is None else float(value)


def _pair(value: Any) -> tuple[float, float] | None:
    return None if not value else (float(value[0]), float(value[1]))


def timeline_from_dict(data: Mapping[str, Any]) -> Timeline:
    """The timeline a journal stores (``gameday.timeline``)."""
    return Timeline(
        start=float(data["start"]),
        end=float(data["end"]),
        phases=tuple(_span(p) for p in data.get("phases") or ()),
        activities=tuple(
            ActivitySpan(
                name=str(a["name"]),
                phase=str(a["phase"]),
                type=str(a.get("type", "action")),
                start=float(a["start"]),
                end=_opt(a.get("end")),
                status=str(a.get("status", "")),
                pause_before=_pair(a.get("pause_before")),
                pause_after=_pair(a.get("pause_after")),
                cut_short_after_s=_opt(a.get("cut_short_after_s")),
            )
            for a in data.get("activities") or ()
        ),
        entries=tuple(
            EntrySpan(
                id=str(e["id"]),
                kind=str(e["kind"]),
                target=str(e.get("target", "")),
                role=role_of(str(e["kind"])) if e.get("role") is None else e["role"],
                on=float(e["on"]),
                off=_opt(e.get("off")),
            )
            for e in data.get("entries") or ()
        ),
        stops=tuple(
            Stop(
                cause=str(s["cause"]),
                at=float(s["at"]),
                effect=str(s.get("effect", "")),
                fired_at=_opt(s.get("fired_at")),
                what=str(s.get("what", "")),
                phase=str(s.get("phase", "")),
            )
            for s in data.get("stops") or ()
        ),
        measurements=tuple(
            Measurement(
                probe=str(m["probe"]),
                window=str(m["window"]),
                at=float(m["at"]),
                value=_opt(m.get("value")),
                tolerance_met=m.get("tolerance_met"),
                phase=str(m.get("phase", "")),
                text=str(m.get("text", "")),
                error=str(m.get("error", "")),
            )
            for m in data.get("measurements") or ()
        ),
        source=str(data.get("source", "recorded")),
        notes=tuple(str(n) for n in data.get("notes") or ()),
    )
