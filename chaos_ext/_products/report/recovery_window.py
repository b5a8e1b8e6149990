"""A run's recovery window, for the charts: from the last undo to the first hold.

``gameday run`` records under ``gameday.recovery`` (:mod:`chaos_ext._runner.recovery`)
when the last fault was undone (``undone_at``, epoch seconds: the latest
``closed_at`` of the run's ledger entries, else the end of its last rollback) and,
when the steady-state hypothesis held again, ``time_to_recover_s``. The window
runs from ``undone_at`` to ``undone_at + time_to_recover_s``; a run that did not
recover (``"recovered": false``) has one to the end of its bound,
``undone_at + seconds``. A journal without those (recovery off or not checked, a
signal that ended the wait, a journal of an older gameday or of plain
``chaos run``) has none, and its charts draw none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["RecoveryWindow", "recovery_window"]


@dataclass(frozen=True)
class RecoveryWindow:
    """``seconds`` from ``start`` (epoch seconds of the last undo); ``recovered``: whether
    the hypothesis held at its end (else the window is the whole bound)."""

    start: float
    seconds: float
    recovered: bool

    @property
    def end(self) -> float:
        return self.start + self.seconds

    @property
    def label(self) -> str:
        """``recovery 10.8 s`` or ``not recovered within 60 s``."""
        if self.recovered:
            return f"recovery {self.seconds:g} s"
        return f"not recovered within {self.seconds:g} s"


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def recovery_window(recovery: Mapping[str, Any] | None) -> RecoveryWindow | None:
    """The window of a journal's ``gameday.recovery`` record, or None (module docstring)."""
    if not isinstance(recovery, Mapping) or recovery.get("checked") is not True:
        return None
    start = _seconds(recovery.get("undone_at"))
    recovered = recovery.get("recovered")
    if start is None or not isinstance(recovered, bool):
        return None
    took = _seconds(recovery.get("time_to_recover_s" if recovered else "seconds"))
    return RecoveryWindow(start, took, recovered) if took is not None else None
