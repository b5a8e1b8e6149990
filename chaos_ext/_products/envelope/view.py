"""Envelopes written by ``gameday envelope``: read, compare, and check against a floor (pure).

The conclusion is recomputed from the recorded runs with the search's own
rules (:func:`chaos_ext._products.envelope.search.conclude`); the summary stored in
``envelope.json`` is never trusted on its own.

Comparing two envelopes of the same argument says how the breaking point
moved, in harshness order (``direction``): *improved* when the tuned side held
at a magnitude at least as harsh as one where the baseline deviated,
*regressed* the other way round, *no change* when the two boundary intervals
overlap, *inconclusive* when either side is incomplete, or noisy with intervals
that overlap. A noisy side is judged by what its runs show whatever the noise:
the harshest magnitude where every run held and nothing milder deviated, and
the mildest where every run deviated and nothing harsher held.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos_ext._products.envelope.document import is_envelope, observations_of, search_of
from chaos_ext._products.envelope.search import (
    Envelope,
    Search,
    agreement,
    answer,
    conclude,
    describe,
    fmt,
    tallies_of,
)
from chaos_ext.errors import EnvelopeError

__all__ = [
    "EnvelopeError",
    "EnvelopeView",
    "FloorCheck",
    "Movement",
    "check_floor",
    "envelope_paths",
    "load_envelope",
    "matches",
    "movement",
    "pair_envelopes",
    "parse_floor",
]

ENVELOPE_FILE = "envelope.json"


@dataclass(frozen=True)
class EnvelopeView:
    """One envelope search, its runs and what they say."""

    source: str
    label: str
    title: str
    settings: Mapping[str, Any]
    search: Search
    runs: tuple[Mapping[str, Any], ...]
    envelope: Envelope
    tolerances: Mapping[str, Any]
    status: str
    note: str

    @property
    def argument(self) -> str:
        return str(self.settings["argument"])

    @property
    def key(self) -> str:
        return f"{self.settings['activity']}.{self.argument}"

    @property
    def unit(self) -> str:
        return str(self.settings.get("unit") or self.argument)

    @property
    def summary(self) -> str:
        return describe(self.envelope, self.search.space, self.unit)

    @property
    def agreement(self) -> str:
        return agreement(self.envelope)

    @property
    def conclusive(self) -> bool:
        return self.envelope.kind not in ("noisy", "incomplete")

    def harshness(self, magnitude: float) -> float:
        return magnitude if self.search.space.direction == "up" else -magnitude

    def interval(self) -> tuple[float, float]:
        """(harshness that held, harshness that deviated); -inf/inf for the end answers."""
        held, deviated = self.envelope.held, self.envelope.deviated
        return (
            self.harshness(held) if held is not None else -math.inf,
            self.harshness(deviated) if deviated is not None else math.inf,
        )

    def robust_interval(self) -> tuple[float, float]:
        """In harshness: the harshest magnitude where every run held and nothing at it
        or milder deviated, and the mildest where every run deviated and nothing at it
        or harsher held (-inf / inf when there is none). What the runs show whatever
        the noise; equal to :meth:`interval` when no run disagrees."""
        tallies = {self.harshness(m): t for m, t in tallies_of(observations_of(self.runs)).items()}
        held = [
            h
            for h, t in tallies.items()
            if t.held and not any(u.deviated for g, u in tallies.items() if g <= h)
        ]
        broke = [
            h
            for h, t in tallies.items()
            if t.deviated and not any(u.held for g, u in tallies.items() if g >= h)
        ]
        return max(held, default=-math.inf), min(broke, default=math.inf)

    def phrase(self) -> str:
        """The search's :func:`~.search.answer`, with its kind when inconclusive."""
        text = answer(self.envelope, self.search.space, self.unit)
        return text if self.conclusive else f"{text} [{self.envelope.kind}]"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise EnvelopeError(f"{path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise EnvelopeError(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from exc
    if not is_envelope(data):
        raise EnvelopeError(f"{path}: not an envelope.json written by gameday envelope")
    return data  # type: ignore[no-any-return]


def load_envelope(path: Path) -> EnvelopeView:
    """Read an envelope.json (or a folder holding one) and recompute its conclusion."""
    path = path / ENVELOPE_FILE if path.is_dir() else path
    data = _read(path)
    try:
        settings = data["settings"]
        search = search_of(settings)
        runs = tuple(data.get("runs") or [])
        envelope = conclude(search, observations_of(runs))
    except (KeyError, TypeError, ValueError) as exc:
        raise EnvelopeError(f"{path}: malformed envelope ({type(exc).__name__}: {exc})") from exc
    experiment = data.get("experiment") or {}
    return EnvelopeView(
        source=str(path),
        label=str(settings.get("label") or path.parent.name),
        title=str(experiment.get("title", "")),
        settings=settings,
        search=search,
        runs=runs,
        envelope=envelope,
        tolerances=experiment.get("tolerances") or {},
        status=str(data.get("status", "?")),
        note=str(data.get("note") or ""),
    )


def _is_envelope_file(path: Path) -> bool:
    try:
        return is_envelope(json.loads(path.read_text()))
    except (OSError, ValueError):
        return False


def envelope_paths(names: Iterable[str]) -> tuple[list[Path], list[str]]:
    """Split inputs into envelope files and everything else (journals).

    An envelope is a file whose ``kind`` is ``gameday-envelope``, a folder
    holding ``envelope.json`` (its ``runs/`` are that envelope's journals), or
    a folder whose sub-folders hold one each.
    """
    envelopes: list[Path] = []
    others: list[str] = []
    for name in names:
        path = Path(name)
        if path.is_dir() and (path / ENVELOPE_FILE).is_file():
            envelopes.append(path / ENVELOPE_FILE)
            continue
        if path.is_dir():
            inner = sorted(
                p / ENVELOPE_FILE for p in path.iterdir() if (p / ENVELOPE_FILE).is_file()
            )
            envelopes.extend(inner)
            if inner and not any(path.glob("*.json")):
                continue
        elif path.suffix == ".json" and _is_envelope_file(path):
            envelopes.append(path)
            continue
        others.append(name)
    return envelopes, others


@dataclass(frozen=True)
class Movement:
    """How the breaking point moved from ``baseline`` to ``tuned``."""

    baseline: EnvelopeView
    tuned: EnvelopeView
    verdict: str  # improved | regressed | no change | inconclusive
    text: str
    backing: str

    def line(self) -> str:
        return f"{self.baseline.key}: {self.text} — {self.verdict} ({self.backing})"


def _verdict(baseline: EnvelopeView, tuned: EnvelopeView) -> str:
    """From what the runs show whatever the noise (:meth:`EnvelopeView.robust_interval`):
    a noisy side still counts when the two sides do not overlap even so."""
    if "incomplete" in (baseline.envelope.kind, tuned.envelope.kind):
        return "inconclusive"
    base_held, base_broke = baseline.robust_interval()
    tuned_held, tuned_broke = tuned.robust_interval()
    if tuned_held >= base_broke:
        return "improved"
    if tuned_broke <= base_held:
        return "regressed"
    return "no change" if baseline.conclusive and tuned.conclusive else "inconclusive"


def movement(baseline: EnvelopeView, tuned: EnvelopeView) -> Movement:
    """``breaks between 40 and 50 ms (fragile) → between 380 and 420 ms (tuned)``."""
    before, after = baseline.phrase(), tuned.phrase()
    if before.startswith("breaks ") and after.startswith("breaks "):
        after = after.removeprefix("breaks ")
    text = f"{before} ({baseline.label}) → {after} ({tuned.label})"
    if baseline.settings.get("direction") != tuned.settings.get("direction"):
        text += " [the two searches disagree on which way is harsher]"
    backing = f"{baseline.label}: {baseline.agreement}; {tuned.label}: {tuned.agreement}"
    return Movement(baseline, tuned, _verdict(baseline, tuned), text, backing)


def pair_envelopes(
    baseline: Sequence[EnvelopeView], tuned: Sequence[EnvelopeView]
) -> tuple[list[tuple[EnvelopeView, EnvelopeView]], list[EnvelopeView]]:
    """Pairs by varied argument (and title when one argument is searched twice); the rest."""
    pairs, unmatched = [], []
    remaining = list(tuned)
    for base in baseline:
        same = [t for t in remaining if t.key == base.key]
        match = next((t for t in same if t.title == base.title), same[0] if same else None)
        if match is None:
            unmatched.append(base)
            continue
        remaining.remove(match)
        pairs.append((base, match))
    return pairs, [*unmatched, *remaining]


@dataclass(frozen=True)
class FloorCheck:
    """Whether an envelope shows the hypothesis holding at the floor magnitude."""

    view: EnvelopeView
    floor: float
    passed: bool
    text: str


def parse_floor(text: str) -> tuple[str, float]:
    """``delay_seconds=0.2`` or ``ACTIVITY.delay_seconds=0.2`` -> (name, 0.2)."""
    name, _, value = text.rpartition("=")
    try:
        floor = float(value)
    except ValueError:
        floor = math.nan
    if not name or not math.isfinite(floor):
        raise ValueError(
            f"--min-envelope {text!r}: expected ARGUMENT=MAGNITUDE, e.g. delay_seconds=0.2"
        )
    return name, floor


def matches(view: EnvelopeView, name: str) -> bool:
    return name in (view.argument, view.key)


def _support(view: EnvelopeView, at: float) -> tuple[float, int] | None:
    """The harshest magnitude at ``at`` or harsher where every run held, with no
    deviation at it or anywhere milder: (magnitude, runs), or None."""
    tallies = tallies_of(observations_of(view.runs))
    best: tuple[float, int] | None = None
    for magnitude, tally in tallies.items():
        h = view.harshness(magnitude)
        if h < at or not tally.held or tally.deviated:
            continue
        if any(t.deviated for m, t in tallies.items() if view.harshness(m) <= h):
            continue
        if best is None or h > view.harshness(best[0]):
            best = (magnitude, len(tally.held))
    return best


def check_floor(view: EnvelopeView, floor: float) -> FloorCheck:
    """Pass only when the runs show the hypothesis holding at ``floor`` or harsher:
    a magnitude there where every run held and nothing deviated at it or at any
    milder magnitude. An incomplete search fails (fail closed)."""
    u = f" {view.unit}"
    at = view.harshness(floor)
    held, broke = view.interval()
    where = f"{view.summary}; repeats: {view.agreement}"
    if view.envelope.kind == "incomplete":
        return FloorCheck(view, floor, False, f"cannot show it holds at {fmt(floor)}{u}: {where}")
    support = _support(view, at)
    if support is not None:
        magnitude, runs = support
        text = (
            f"holds at {fmt(floor)}{u}: held at {fmt(magnitude)}{u} ({runs}/{runs} runs), "
            f"nothing deviated there or milder; {where}"
        )
        return FloorCheck(view, floor, True, text)
    if broke <= at:
        text = f"breaking point below the floor {fmt(floor)}{u}: {where}"
    elif not view.conclusive:
        text = f"runs disagree at or below the floor {fmt(floor)}{u}: {where}"
    elif math.isinf(broke) and held < at:
        harsh = fmt(view.search.space.harsh)
        text = f"the search stopped at {harsh}{u}, milder than the floor {fmt(floor)}{u}: {where}"
    else:
        text = f"the floor {fmt(floor)}{u} lies inside the boundary interval: {where}"
    return FloorCheck(view, floor, False, text)
