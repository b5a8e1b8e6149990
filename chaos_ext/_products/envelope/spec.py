"""Envelope settings: ``--vary`` and friends, or the experiment's ``gameday`` extension (pure).

An experiment stays a standard Chaos Toolkit file; what to vary can sit in
its one ``gameday`` extension entry, and command-line options override it key
by key::

    "extensions": [{"name": "gameday", "envelope": {
        "vary": "hold-dns-tcp.connections=1..40",
        "resolution": 1, "direction": "up", "repeats": 2, "max_runs": 20,
        "settle_seconds": 20, "format": "", "unit": "connections", "label": "fragile"}}]

``vary`` names a method activity and one of its Python provider's arguments,
and the range LOW..HIGH. Both ends are required: the harsh end is the blast
radius and is never exceeded. ``resolution`` is absolute (``5``) or relative
to the boundary's magnitude (``"10%"``). ``format`` renders the magnitude into
the argument (``"max-minus-{}"`` for ``exhaust_connections``' ``target``).
"""

from __future__ import annotations

import copy
import math
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chaos_ext._products.envelope.search import Search, Space, fmt, worst_case_runs
from chaos_ext._runner.run_times import MAX_SETTLE_SECONDS, gameday_extension
from chaos_ext.errors import InvalidArgument

__all__ = [
    "DEFAULTS",
    "EnvelopeSettings",
    "Vary",
    "apply_magnitude",
    "envelope_extension",
    "parse_resolution",
    "parse_vary",
    "rendered",
    "settings_from",
    "unit_of",
]

DEFAULTS: Mapping[str, Any] = {
    "direction": "up",
    "repeats": 2,
    "max_runs": 20,
    "settle_seconds": 0.0,
    "format": "",
}
MAX_RUNS_CAP = 200
_VARY = re.compile(r"^(?P<activity>.+)\.(?P<argument>[A-Za-z_][A-Za-z0-9_]*)=(?P<range>.+)$")
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_RANGE = re.compile(rf"^\s*(?P<low>{_NUMBER})\s*\.\.\s*(?P<high>{_NUMBER})\s*$")
_UNITS = (("_ms", "ms"), ("_seconds", "s"), ("_s", "s"), ("_percent", "%"), ("_pct", "%"))
_KEYS = frozenset(
    {"vary", "resolution", "direction", "repeats", "max_runs", "settle_seconds", "format"}
    | {"unit", "label"}
)


@dataclass(frozen=True)
class Vary:
    """Which argument of which method activity, over which range."""

    activity: str
    argument: str
    low: float
    high: float
    integer: bool

    def text(self) -> str:
        return f"{self.activity}.{self.argument}={fmt(self.low)}..{fmt(self.high)}"


@dataclass(frozen=True)
class EnvelopeSettings:
    """Everything ``gameday envelope`` needs besides the experiment and the runner."""

    vary: Vary
    search: Search
    settle_seconds: float
    value_format: str
    unit: str
    label: str

    @property
    def worst_case_runs(self) -> int:
        return worst_case_runs(self.search)

    def as_dict(self) -> dict[str, Any]:
        space = self.search.space
        return {
            "activity": self.vary.activity,
            "argument": self.vary.argument,
            "low": self.vary.low,
            "high": self.vary.high,
            "integer": self.vary.integer,
            "direction": space.direction,
            "resolution": space.resolution,
            "relative": space.relative,
            "repeats": self.search.repeats,
            "max_runs": self.search.max_runs,
            "max_unsteady": self.search.max_unsteady,
            "settle_seconds": self.settle_seconds,
            "format": self.value_format,
            "unit": self.unit,
            "label": self.label,
            "mild": space.mild,
            "harsh": space.harsh,
        }


def _is_integer_literal(text: str) -> bool:
    return re.fullmatch(r"[-+]?\d+", text.strip()) is not None


def parse_vary(text: Any) -> Vary:
    """``ACTIVITY.ARGUMENT=LOW..HIGH`` (e.g. ``delay-app-to-db.delay_seconds=0.01..0.8``)."""
    if not isinstance(text, str):
        raise InvalidArgument(f"vary: expected 'ACTIVITY.ARGUMENT=LOW..HIGH', got {text!r}")
    match = _VARY.match(text.strip())
    if not match:
        raise InvalidArgument(
            f"vary: {text!r} is not ACTIVITY.ARGUMENT=LOW..HIGH "
            "(e.g. delay-app-to-db.delay_seconds=0.01..0.8)"
        )
    bounds = _RANGE.match(match["range"])
    if not bounds:
        raise InvalidArgument(
            f"vary: {match['range']!r} is not a range LOW..HIGH of numbers (both ends are "
            "required: the harsh end is the blast radius)"
        )
    low, high = float(bounds["low"]), float(bounds["high"])
    if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
        raise InvalidArgument(f"vary: the range {match['range']!r} needs LOW < HIGH")
    integer = _is_integer_literal(bounds["low"]) and _is_integer_literal(bounds["high"])
    return Vary(match["activity"].strip(), match["argument"], low, high, integer)


def parse_resolution(value: Any) -> tuple[float, bool]:
    """``5`` (absolute) or ``"10%"`` (relative): ``(amount, relative)``."""
    text = str(value).strip() if isinstance(value, int | float | str) else ""
    relative = text.endswith("%")
    try:
        amount = float(text.rstrip("%")) if text and not isinstance(value, bool) else math.nan
    except ValueError:
        amount = math.nan
    if relative:
        amount /= 100
    if not math.isfinite(amount) or amount <= 0 or (relative and amount >= 1):
        raise InvalidArgument(
            f"resolution: expected a positive number (5) or a percentage below 100 (10%), "
            f"got {value!r}"
        )
    return amount, relative


def unit_of(argument: str) -> str:
    """``delay_seconds`` -> ``s``, ``p99_ms`` -> ``ms``; else the argument's name."""
    for suffix, unit in _UNITS:
        if argument.endswith(suffix):
            return unit
    return argument


def envelope_extension(experiment: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``envelope`` object of the experiment's ``gameday`` extension ({} if none)."""
    found = gameday_extension(experiment).get("envelope") or {}
    if not isinstance(found, Mapping):
        raise InvalidArgument("extensions[gameday].envelope: expected an object")
    unknown = sorted(set(found) - _KEYS)
    if unknown:
        raise InvalidArgument(
            f"extensions[gameday].envelope: unknown key(s) {', '.join(unknown)} "
            f"(known: {', '.join(sorted(_KEYS))})"
        )
    return found


def _int_setting(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgument(
            f"{name}: expected a whole number within {low}..{high}, got {value!r}"
        )
    return value


def _settle(value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= MAX_SETTLE_SECONDS
    ):
        raise InvalidArgument(
            f"settle_seconds: expected 0..{MAX_SETTLE_SECONDS:g} seconds, got {value!r}"
        )
    return float(value)


def _format(value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(f"format: expected a string like 'max-minus-{{}}', got {value!r}")
    if not value:
        return ""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(value) if f is not None]
    except ValueError as exc:
        raise InvalidArgument(f"format: {value!r}: {exc}") from exc
    if fields != [""]:
        raise InvalidArgument(f"format: {value!r} needs exactly one '{{}}' for the magnitude")
    return value


def _space(vary: Vary, merged: Mapping[str, Any]) -> Space:
    raw = merged.get("resolution")
    if raw is None:
        amount, relative = (1.0, False) if vary.integer else (0.05, True)
    else:
        amount, relative = parse_resolution(raw)
    integer = vary.integer and (relative or float(amount).is_integer())
    direction = merged["direction"]
    if direction not in ("up", "down"):
        raise InvalidArgument(f"direction: expected up or down, got {direction!r}")
    try:
        return Space(vary.low, vary.high, amount, relative, integer, direction)
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from exc


def settings_from(
    experiment: Mapping[str, Any],
    overrides: Mapping[str, Any],
    default_label: str,
    default_settle: float = 0.0,
) -> EnvelopeSettings:
    """Merge the extension's settings with the command line's (None: not given)."""
    merged: dict[str, Any] = {**DEFAULTS, "settle_seconds": default_settle}
    merged.update(envelope_extension(experiment))
    merged.update({k: v for k, v in overrides.items() if v is not None})
    if not merged.get("vary"):
        raise InvalidArgument(
            'what to vary: give --vary ACTIVITY.ARGUMENT=LOW..HIGH, or "vary" in the '
            'experiment\'s {"name": "gameday", "envelope": {...}} extension'
        )
    vary = parse_vary(merged["vary"])
    search = Search(
        _space(vary, merged),
        repeats=_int_setting("repeats", merged["repeats"], 0, 20),
        max_runs=_int_setting("max_runs", merged["max_runs"], 1, MAX_RUNS_CAP),
    )
    settings = EnvelopeSettings(
        vary=vary,
        search=search,
        settle_seconds=_settle(merged["settle_seconds"]),
        value_format=_format(merged["format"]),
        unit=str(merged.get("unit") or unit_of(vary.argument)),
        label=str(merged.get("label") or default_label),
    )
    needed = settings.worst_case_runs
    if needed > search.max_runs:
        raise InvalidArgument(
            f"this search may need {needed if needed < 10**6 else 'unboundedly many'} runs "
            f"(both ends, bisection to the resolution, 2 x {search.repeats} repeats) but "
            f"max_runs is {search.max_runs}: raise --max-runs or coarsen --resolution"
        )
    return settings


def rendered(settings: EnvelopeSettings, magnitude: float) -> Any:
    """The argument's value at ``magnitude`` (an int for integer ranges, formatted if asked)."""
    number: int | float = int(magnitude) if settings.search.space.integer else float(magnitude)
    return settings.value_format.format(number) if settings.value_format else number


def apply_magnitude(
    experiment: Mapping[str, Any], settings: EnvelopeSettings, magnitude: float, run: int = 0
) -> dict[str, Any]:
    """A copy of the experiment whose varied argument is ``magnitude`` (pure).

    Every method activity with that name gets it; the run's magnitude is noted
    in the ``gameday`` extension (``envelope_run``) so its journal says it.
    """
    space = settings.search.space
    if not min(space.low, space.high) <= magnitude <= max(space.low, space.high):
        raise InvalidArgument(f"magnitude {fmt(magnitude)} is outside {settings.vary.text()}")
    result = copy.deepcopy(dict(experiment))
    vary = settings.vary
    found = 0
    for activity in result.get("method") or []:
        if not isinstance(activity, dict) or activity.get("name") != vary.activity:
            continue
        provider = activity.get("provider")
        if not isinstance(provider, dict) or provider.get("type") != "python":
            raise InvalidArgument(
                f"vary: activity {vary.activity!r} has no Python provider whose arguments "
                "could be varied"
            )
        provider.setdefault("arguments", {})[vary.argument] = rendered(settings, magnitude)
        found += 1
    if not found:
        names = [a.get("name") for a in result.get("method") or [] if isinstance(a, dict)]
        raise InvalidArgument(
            f"vary: no method activity named {vary.activity!r} (method: "
            f"{', '.join(str(n) for n in names if n) or 'empty'})"
        )
    note = {"magnitude": magnitude, "argument": vary.argument, "activity": vary.activity}
    if run:
        note["run"] = run
    _note_run(result, note)
    return result


def _note_run(experiment: dict[str, Any], note: dict[str, Any]) -> None:
    extensions = experiment.setdefault("extensions", [])
    for ext in extensions:
        if isinstance(ext, dict) and ext.get("name") == "gameday":
            ext["envelope_run"] = note
            return
    extensions.append({"name": "gameday", "envelope_run": note})
