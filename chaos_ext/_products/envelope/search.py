"""The breaking point of a hypothesis: the envelope search, as pure functions.

A *magnitude* is one value of one activity argument (``delay_seconds``,
``connections``). The search runs the whole experiment at one magnitude at a
time and reads the outcome of each run; these functions decide, from the
outcomes so far, which magnitude to run next and what the runs mean. They
never run anything, so every decision is unit-tested and replayable.

1. **Ends first.** The mild end (LOW, or HIGH with ``direction="down"``);
   if it deviates the answer is "breaks already at the mild end". Else the
   harsh end; if it holds the answer is "holds up to the harsh end".
2. **Bisection** between the harshest magnitude that held and the mildest
   that deviated, until they are within the resolution (absolute, or
   relative to the magnitude; integer ranges stop at neighbours).
3. **Repeats**: K more runs at each side of the boundary (at the one end
   for the two end answers), alternating sides, so noise shows. One
   deviation marks a magnitude as broken and "held" needs every run there to
   agree (:func:`bracket`), so a repeat that disagrees moves the boundary and
   the search goes on (bisecting and repeating again) where the runs agree;
   noise can thus cost runs beyond the clean worst case, up to ``max_runs``.

Only ``held`` and ``deviated`` runs count. An ``unsteady`` run (the system
was out of tolerance before anything was injected) says nothing about its
magnitude: that magnitude is tried again, and after ``max_unsteady`` in a
row the search stops. ``failed``, ``aborted``, ``interrupted`` and
``rollback-failed`` stop the search at once (fail closed). ``max_runs`` caps
everything. A magnitude whose runs disagree, or a deviation milder than a
magnitude that held, makes the answer ``noisy`` and is listed, never hidden.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "COUNTED",
    "STOPPING",
    "Envelope",
    "Observation",
    "Search",
    "Space",
    "Step",
    "Stopped",
    "Tally",
    "agreement",
    "answer",
    "bracket",
    "conclude",
    "describe",
    "fmt",
    "next_step",
    "tallies_of",
    "worst_case_runs",
]

Direction = Literal["up", "down"]
Phase = Literal["end", "bisect", "repeat"]
Kind = Literal["boundary", "breaks-at-mild-end", "holds-to-harsh-end", "noisy", "incomplete"]

COUNTED = ("held", "deviated", "not-recovered")  # not-recovered: it did not hold, and worse
STOPPING = {
    "failed": "a run failed (an action did not run as designed)",
    "aborted": "a run was aborted (a stop condition fired)",
    "interrupted": "interrupted (signal)",
    "rollback-failed": "a rollback did not complete: run `gameday rollback`",
}
_MAX_BISECTIONS = 64


def fmt(value: float) -> str:
    """A magnitude as people write it: ``20``, ``2.5``, ``0.001``."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.6g}"


@dataclass(frozen=True)
class Space:
    """The magnitudes the search may try: ``low..high``, never outside."""

    low: float
    high: float
    resolution: float
    relative: bool = False  # resolution is a fraction of the boundary's magnitude
    integer: bool = False
    direction: Direction = "up"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high)) or self.low >= self.high:
            raise ValueError(f"the range {fmt(self.low)}..{fmt(self.high)} is empty: LOW < HIGH")
        if not math.isfinite(self.resolution) or self.resolution <= 0:
            raise ValueError(f"resolution must be > 0, got {self.resolution:g}")
        if self.relative and self.resolution >= 1:
            raise ValueError(f"a relative resolution is below 100 %, got {self.resolution:.0%}")
        if self.integer and not (float(self.low).is_integer() and float(self.high).is_integer()):
            raise ValueError("an integer range needs integer ends")
        if self.direction not in ("up", "down"):
            raise ValueError(f"direction is up or down, got {self.direction!r}")

    @property
    def mild(self) -> float:
        """The end least likely to break (``low`` when larger is harsher)."""
        return self.low if self.direction == "up" else self.high

    @property
    def harsh(self) -> float:
        """The end most likely to break: the blast radius, never exceeded."""
        return self.high if self.direction == "up" else self.low

    def harsher(self, a: float, b: float) -> bool:
        """Whether ``a`` is a harsher magnitude than ``b``."""
        return a > b if self.direction == "up" else a < b

    def excess(self, held: float, deviated: float) -> float:
        """Width of the interval in resolutions (<= 1: found)."""
        width = abs(deviated - held)
        if self.integer and width <= 1:
            return 0.0
        if self.relative:
            scale = max(abs(held), abs(deviated))
            return math.inf if scale == 0 else width / (self.resolution * scale)
        return width / self.resolution

    def close_enough(self, held: float, deviated: float) -> bool:
        return self.excess(held, deviated) <= 1 + 1e-9

    def between(self, a: float, b: float) -> float:
        """The magnitude to try between ``a`` and ``b`` (geometric for relative
        resolutions over positive magnitudes; rounded down for integers, always
        strictly inside when the interval has room)."""
        lo, hi = min(a, b), max(a, b)
        mid = math.sqrt(lo * hi) if self.relative and lo > 0 else (lo + hi) / 2
        if self.integer:
            mid = float(min(max(math.floor(mid), lo + 1), hi - 1))
        return mid


@dataclass(frozen=True)
class Search:
    """The search's bounds: where, how many repeats, how many runs at most."""

    space: Space
    repeats: int = 2
    max_runs: int = 20
    max_unsteady: int = 3  # unsteady runs in a row before giving up

    def __post_init__(self) -> None:
        if not 0 <= self.repeats <= 20:
            raise ValueError(f"repeats must be within 0..20, got {self.repeats}")
        if self.max_runs < 1:
            raise ValueError(f"max_runs must be at least 1, got {self.max_runs}")
        if self.max_unsteady < 1:
            raise ValueError(f"max_unsteady must be at least 1, got {self.max_unsteady}")


@dataclass(frozen=True)
class Observation:
    """One run: the magnitude it ran at, its outcome, why it ran."""

    magnitude: float
    outcome: str  # held | deviated | unsteady | failed | aborted | interrupted | rollback-failed
    phase: Phase


@dataclass(frozen=True)
class Step:
    """The next run to do."""

    magnitude: float
    phase: Phase
    why: str


@dataclass(frozen=True)
class Stopped:
    """The search stopped before its answer."""

    cause: str  # a STOPPING outcome, "unsteady" or "max-runs"
    reason: str


def bracket(space: Space, observations: Sequence[Observation]) -> tuple[float | None, float | None]:
    """(held, deviated): the mildest magnitude where any run deviated, and the
    harshest magnitude milder than it where every run held.

    Conservative on purpose: one deviation marks a magnitude as broken, and
    "held" needs every run there to agree, so a repeat that disagrees moves the
    bracket and the search goes on between the magnitudes the runs agree on.
    """
    tallies = tallies_of(observations)
    broken = [m for m, t in tallies.items() if t.deviated]
    deviated = min(broken, key=_mildest(space)) if broken else None
    holding = [
        m
        for m, t in tallies.items()
        if t.held and not t.deviated and (deviated is None or space.harsher(deviated, m))
    ]
    held = max(holding, key=_mildest(space)) if holding else None
    return held, deviated


def _mildest(space: Space) -> Callable[[float], float]:
    """Sort key: the mildest magnitude first."""
    return (lambda m: m) if space.direction == "up" else (lambda m: -m)


def _confirm(
    search: Search, observations: Sequence[Observation], targets: Sequence[float], side: str
) -> Step | None:
    """Runs until each target has 1 + K counted runs, the sides alternating."""
    tallies = tallies_of(observations)
    done = {t: len(tallies[t].held) + len(tallies[t].deviated) for t in targets}
    pending = [t for t in targets if done[t] < search.repeats + 1]
    if not pending:
        return None
    target = min(pending, key=lambda t: (done[t], targets.index(t)))
    return Step(
        target,
        "repeat",
        f"repeat {done[target]}/{search.repeats} at {fmt(target)} ({side})",
    )


def _planned(search: Search, observations: Sequence[Observation]) -> Step | None:
    space = search.space
    held, deviated = bracket(space, observations)
    if held is None and deviated is None:
        return Step(space.mild, "end", f"the mild end {fmt(space.mild)}: does it break already?")
    if held is None and deviated is not None:
        return _confirm(search, observations, [deviated], "breaks at the mild end")
    if deviated is None and held is not None:
        if held != space.harsh:
            return Step(space.harsh, "end", f"the harsh end {fmt(space.harsh)}: does it hold?")
        return _confirm(search, observations, [held], "holds at the harsh end")
    assert held is not None and deviated is not None  # noqa: S101 - narrowed above
    if not space.close_enough(held, deviated):
        middle = space.between(held, deviated)
        return Step(middle, "bisect", f"between {fmt(held)} (held) and {fmt(deviated)} (deviated)")
    return _confirm(search, observations, [held, deviated], "each side of the boundary")


def _unsteady_tail(observations: Sequence[Observation]) -> int:
    count = 0
    for o in reversed(observations):
        if o.outcome != "unsteady":
            break
        count += 1
    return count


def next_step(search: Search, observations: Sequence[Observation]) -> Step | Stopped | None:
    """The next run, a reason to stop early, or None when the answer is complete."""
    for o in observations:
        if o.outcome not in (*COUNTED, "unsteady"):
            reason = STOPPING.get(o.outcome, f"a run ended {o.outcome!r}")
            return Stopped(o.outcome, f"{reason} at {fmt(o.magnitude)}")
    step = _planned(search, observations)
    if step is None:
        return None
    tail = _unsteady_tail(observations)
    if tail >= search.max_unsteady:
        return Stopped(
            "unsteady",
            f"{tail} runs in a row found the system out of tolerance before the fault "
            f"(last at {fmt(observations[-1].magnitude)}): nothing to measure against",
        )
    if len(observations) >= search.max_runs:
        return Stopped("max-runs", f"--max-runs {search.max_runs} reached; next was {step.why}")
    return step


def worst_case_runs(search: Search) -> int:
    """Runs the search needs at most when every run counts (both ends, the
    longest bisection, 2 x repeats)."""
    space = search.space
    a, b = space.mild, space.harsh
    steps = 0
    while not space.close_enough(a, b) and steps < _MAX_BISECTIONS:
        middle = space.between(a, b)
        a, b = (a, middle) if space.excess(a, middle) >= space.excess(middle, b) else (middle, b)
        steps += 1
    if steps >= _MAX_BISECTIONS:
        return 10**6  # the resolution can never be reached (e.g. relative around 0)
    return 2 + steps + 2 * search.repeats


@dataclass(frozen=True)
class Tally:
    """The counted runs at one magnitude (run numbers start at 1)."""

    magnitude: float
    held: tuple[int, ...]
    deviated: tuple[int, ...]

    @property
    def agree(self) -> bool:
        return not (self.held and self.deviated)

    def text(self) -> str:
        total = len(self.held) + len(self.deviated)
        parts = []
        if self.held:
            parts.append(f"held {len(self.held)}/{total}")
        if self.deviated:
            parts.append(f"deviated {len(self.deviated)}/{total}")
        runs = ""
        if not self.agree:
            runs = (
                f" (held: runs {', '.join(map(str, self.held))}; deviated: runs "
                f"{', '.join(map(str, self.deviated))})"
            )
        return f"{' and '.join(parts)} at {fmt(self.magnitude)}{runs}"


@dataclass(frozen=True)
class Envelope:
    """What the runs say about the breaking point."""

    kind: Kind
    held: float | None  # the harshest magnitude that held (bisection's bracket)
    deviated: float | None  # the mildest magnitude that deviated
    tallies: tuple[Tally, ...]  # at the bracket's magnitudes
    noisy: tuple[Tally, ...]  # every magnitude whose runs disagree
    non_monotone: tuple[str, ...]
    stopped: Stopped | None
    runs: int
    counted: int


def tallies_of(observations: Sequence[Observation]) -> dict[float, Tally]:
    """Every magnitude's counted runs."""
    found: dict[float, tuple[list[int], list[int]]] = {}
    for number, o in enumerate(observations, start=1):
        if o.outcome in COUNTED:
            held, deviated = found.setdefault(o.magnitude, ([], []))
            (held if o.outcome == "held" else deviated).append(number)
    return {m: Tally(m, tuple(h), tuple(d)) for m, (h, d) in found.items()}


def _non_monotone(space: Space, tallies: dict[float, Tally]) -> list[str]:
    """Deviations at a magnitude milder than one that held."""
    found = []
    for milder in sorted(tallies, key=lambda m: m if space.direction == "up" else -m):
        tally = tallies[milder]
        if not tally.deviated:
            continue
        harsher = [m for m, t in tallies.items() if t.held and space.harsher(m, milder)]
        if harsher:
            worst = max(harsher) if space.direction == "up" else min(harsher)
            runs = ", ".join(map(str, tally.deviated))
            found.append(
                f"deviated at {fmt(milder)} (run {runs}) although {fmt(worst)}, a harsher "
                f"magnitude, held (run {', '.join(map(str, tallies[worst].held))})"
            )
    return found


def conclude(search: Search, observations: Sequence[Observation]) -> Envelope:
    """The answer so far (complete when :func:`next_step` returns None)."""
    space = search.space
    held, deviated = bracket(space, observations)
    tallies = tallies_of(observations)
    shown = tuple(tallies[m] for m in (held, deviated) if m is not None)
    noisy = tuple(t for _, t in sorted(tallies.items()) if not t.agree)
    odd = tuple(_non_monotone(space, tallies))
    upcoming = next_step(search, observations)
    stopped = upcoming if isinstance(upcoming, Stopped) else None
    if isinstance(upcoming, Step):
        stopped = Stopped("not-finished", f"not finished: next is {upcoming.why}")
    kind: Kind
    if stopped is not None:
        kind = "incomplete"
    elif noisy or odd:
        kind = "noisy"
    elif held is None:
        kind = "breaks-at-mild-end"
    elif deviated is None:
        kind = "holds-to-harsh-end"
    else:
        kind = "boundary"
    counted = sum(1 for o in observations if o.outcome in COUNTED)
    return Envelope(kind, held, deviated, shown, noisy, odd, stopped, len(observations), counted)


def answer(envelope: Envelope, space: Space, unit: str = "") -> str:
    """The envelope's answer in words, the one source of it (the CLI line, reports, compare).

    ``breaks between 19 and 20 connections``, ``breaks already at 10 ms``,
    ``breaks at 20 connections`` (only a deviation counted), ``holds up to 800 ms``.
    """
    u = f" {unit}" if unit else ""
    held, deviated = envelope.held, envelope.deviated
    if envelope.kind == "breaks-at-mild-end":
        return f"breaks already at {fmt(space.mild)}{u}"
    if envelope.kind == "holds-to-harsh-end":
        return f"holds up to {fmt(space.harsh)}{u}"
    if held is not None and deviated is not None:
        lo, hi = sorted((held, deviated))
        return f"breaks between {fmt(lo)} and {fmt(hi)}{u}"
    if deviated is not None:
        return f"breaks at {fmt(deviated)}{u}"
    if held is not None:
        return f"holds up to {fmt(held)}{u}"
    return "no magnitude counted"


def describe(envelope: Envelope, space: Space, unit: str = "") -> str:
    """One line: the :func:`answer`, with why an end was the answer or why it is not conclusive."""
    text = answer(envelope, space, unit)
    if envelope.kind == "breaks-at-mild-end":
        return f"{text} (the mildest magnitude tried)"
    if envelope.kind == "holds-to-harsh-end":
        return f"{text} (the harshest magnitude allowed)"
    if envelope.kind == "noisy":
        return f"noisy: {text}, but runs disagree"
    if envelope.kind == "incomplete":
        why = envelope.stopped.reason if envelope.stopped else "stopped"
        return f"incomplete: {text} so far; {why}"
    return text


def agreement(envelope: Envelope) -> str:
    """How many runs back the answer: ``held 3/3 at 19, deviated 3/3 at 20``."""
    return "; ".join(t.text() for t in envelope.tallies) or "no counted run"
