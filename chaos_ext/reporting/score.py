"""The resilience score: the weighted share of steady-state hypotheses that held.

Each journal (one run of one experiment) is one hypothesis. It *held* when the
run's outcome is ``held``: every tolerance met before, during and after the
method, and every action ran as designed. Deviated, failed, aborted or
interrupted runs did not show the hypothesis holding, so they count as not held.

Weight: 1 per run, or the ``weight`` of an experiment-level extension
``{"name": "gameday", "weight": 3}``. Runs of experiments without a
steady-state hypothesis carry no weight (there is nothing to hold).

``score = 100 * sum(weight of held runs) / sum(weight of all runs)``, ``None``
when the total weight is 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chaos_ext.reporting.model import RunView

__all__ = ["Score", "held", "resilience_score"]


@dataclass(frozen=True)
class Score:
    """The score and what it is made of."""

    value: float | None
    held_weight: float
    total_weight: float
    held: int
    counted: int

    def text(self) -> str:
        if self.value is None:
            return "n/a (no steady-state hypothesis)"
        return f"{self.value:.1f} / 100 ({self.held} of {self.counted} hypotheses held)"


def held(view: RunView) -> bool:
    """Whether this run showed its hypothesis holding."""
    return view.outcome == "held"


def _weight(view: RunView) -> float:
    return view.weight if view.hypothesis_probes else 0.0


def resilience_score(views: Sequence[RunView]) -> Score:
    """The weighted share (0-100) of hypotheses held over ``views``."""
    counted = [v for v in views if _weight(v) > 0]
    total = sum(_weight(v) for v in counted)
    kept = [v for v in counted if held(v)]
    held_weight = sum(_weight(v) for v in kept)
    value = 100.0 * held_weight / total if total > 0 else None
    return Score(value, held_weight, total, len(kept), len(counted))
