"""The run's times an experiment sets in its gameday extension, read and checked.

``{"name": "gameday", "settle_seconds": 60, "recover_seconds": 120,
"watchdog_grace_seconds": 300}``, each overridden by its option (``--settle``,
``--recover``, ``--watchdog-grace``). Pure readers: ``gameday validate`` checks
them without importing what settles or polls a run (:mod:`chaos_ext._runner.settle`,
:mod:`chaos_ext._runner.recovery`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from chaos_ext._core.watchdog import parse_grace
from chaos_ext.errors import InvalidArgument

__all__ = [
    "DEFAULT_RECOVER_S",
    "MAX_SETTLE_SECONDS",
    "gameday_extension",
    "recover_seconds_of",
    "settle_seconds_of",
    "watchdog_grace_of",
]

MAX_SETTLE_SECONDS = 3600.0
DEFAULT_RECOVER_S = 60.0
"""How long a system has to come back by default (the sandbox's fragile app needed
about 11 s after DNS saturation)."""


def gameday_extension(experiment: Mapping[str, Any]) -> Mapping[str, Any]:
    """The experiment's ``{"name": "gameday", ...}`` extension (empty when absent)."""
    for ext in experiment.get("extensions") or []:
        if isinstance(ext, Mapping) and ext.get("name") == "gameday":
            return ext
    return {}


def settle_seconds_of(experiment: Mapping[str, Any], override: float | None = None) -> float:
    """Seconds to settle: ``override`` (``--settle``) else the experiment's setting, else 0."""
    value: Any = (
        override if override is not None else gameday_extension(experiment).get("settle_seconds", 0)
    )
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgument(f"settle_seconds: expected a number of seconds, got {value!r}")
    if not 0 <= value <= MAX_SETTLE_SECONDS:
        raise InvalidArgument(
            f"settle_seconds: {value:g} is outside 0..{MAX_SETTLE_SECONDS:g} seconds"
        )
    return float(value)


def watchdog_grace_of(experiment: Mapping[str, Any], override: float | None = None) -> float | None:
    """The dead-man grace of the run's faults: ``override`` (``--watchdog-grace``), else the
    extension's ``watchdog_grace_seconds``, else None (``$GAMEDAY_WATCHDOG_GRACE`` or the
    default decides); 0 turns the dead-owner undo off. See :mod:`chaos_ext._core.watchdog`."""
    value = override
    if value is None:
        value = gameday_extension(experiment).get("watchdog_grace_seconds")
    if value is None:
        return None
    if isinstance(value, str):  # "60" would be a typo of 60 here: a number only
        raise InvalidArgument(
            f"watchdog_grace_seconds: expected a number of seconds (0: off), got {value!r}"
        )
    return parse_grace(value)


def recover_seconds_of(experiment: Mapping[str, Any], override: float | None = None) -> float:
    """``--recover``, else the gameday extension's ``recover_seconds``, else the default."""
    value: Any = override
    if value is None:
        for ext in experiment.get("extensions") or []:
            if isinstance(ext, Mapping) and ext.get("name") == "gameday":
                value = ext.get("recover_seconds")
    if value is None:
        return DEFAULT_RECOVER_S
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise InvalidArgument(
            f"recover_seconds: expected a number of seconds >= 0 (0: off), got {value!r}"
        )
    return float(value)
