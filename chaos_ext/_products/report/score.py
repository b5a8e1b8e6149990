"""The resilience score: the weighted share of steady-state hypotheses that held.

Each journal (one run of one experiment) is one hypothesis. It *held* when the
run's outcome is ``held``: every tolerance met before, during and after the
method, every action ran as designed and every rollback completed. Deviated,
failed, aborted, interrupted and rollback-failed runs did not show the
hypothesis holding, so they count as not held.

*Unsteady* runs (the steady state did not hold before the method, so nothing
was injected) prove nothing either way: they are left out of the score, and the
score says how many were left out.

Weight: 1 per run, or the ``weight`` of an experiment-level extension
``{"name": "gameday", "weight": 3}``. Runs of experiments without a
steady-state hypothesis carry no weight (there is nothing to hold).

``score = 100 * sum(weight of held runs) / sum(weight of all runs)``, ``None``
when the total weight is 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chaos_ext._products.report.model import RunView

__all__ = ["Score", "held", "resilience_score"]


@dataclass(frozen=True)
class Score:
    """The score and what it is made of."""

    value: float | None
    held_weight: float
    total_weight: float
    held: int
    counted: int
    left_out: int = 0  # unsteady runs: nothing was injected, nothing proven

    def text(self) -> str:
        skipped = (
            f"; {self.left_out} unsteady run(s) left out, nothing was injected in them"
            if self.left_out
            else ""
        )
        if self.value is None and self.left_out:
            return f"n/a (nothing to score{skipped})"
        if self.value is None:
            return "n/a (no steady-state hypothesis to score)"
        return f"{self.value:.1f} / 100 ({self.held} of {self.counted} hypotheses held{skipped})"


def held(view: RunView) -> bool:
    """Whether this run showed its hypothesis holding."""
    return view.outcome == "held"


def _weight(view: RunView) -> float:
    return view.weight if view.hypothesis_probes else 0.0


def resilience_score(views: Sequence[RunView]) -> Score:
    """The weighted share (0-100) of hypotheses held over ``views``."""
    weighted = [v for v in views if _weight(v) > 0]
    unsteady = [v for v in weighted if v.outcome == "unsteady"]
    counted = [v for v in weighted if v.outcome != "unsteady"]
    total = sum(_weight(v) for v in counted)
    kept = [v for v in counted if held(v)]
    held_weight = sum(_weight(v) for v in kept)
    value = 100.0 * held_weight / total if total > 0 else None
    return Score(value, held_weight, total, len(kept), len(counted), len(unsteady))
