"""The answer first: per paired experiment, its verdicts, hypotheses held, main effect.

The main effect is the fault-window row (else any row) that moved most,
decided verdicts first, in the metric's own values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chaos_ext._core.timeline import WINDOW_PHRASES
from chaos_ext._products.report.compare import pair_experiments, shown_value
from chaos_ext._products.report.score import held
from chaos_ext._products.report.stats import Comparison
from chaos_ext._products.report.windows import Run

__all__ = ["Headline", "headlines"]


@dataclass(frozen=True)
class Headline:
    """One experiment's answer: verdicts before/after, hypotheses held, main effect."""

    experiment: str
    before: str
    after: str
    held_before: tuple[int, int]
    held_after: tuple[int, int]
    effect: str

    def line(self) -> str:
        (hb, nb), (ha, na) = self.held_before, self.held_after
        effect = f"; {self.effect}" if self.effect else ""
        return (
            f"{self.experiment}: {self.before} → {self.after} (held {hb}/{nb} → {ha}/{na}){effect}"
        )


def _verdicts(runs: Sequence[Run]) -> str:
    outcomes = sorted({r.view.outcome for r in runs})
    if len(runs) == 1 or len(outcomes) == 1:
        return outcomes[0] if len(runs) == 1 else f"{outcomes[0]} ×{len(runs)}"
    return ", ".join(f"{o} {sum(r.view.outcome == o for r in runs)}" for o in outcomes)


def _held(runs: Sequence[Run]) -> tuple[int, int]:
    counted = [r.view for r in runs if r.view.outcome != "unsteady" and r.view.hypothesis_probes]
    return sum(held(v) for v in counted), len(counted)


_RANK = {"improved": 0, "regressed": 0, "changed": 1, "direction only": 2}


def _main_effect(results: Sequence[Comparison]) -> str:
    """The fault-window row (else any) that moved most, decided verdicts first."""
    moved = [c for c in results if c.verdict in _RANK and c.difference != 0]
    if not moved:
        return ""
    top = min(
        moved,
        key=lambda c: (
            c.window != "during",
            _RANK[c.verdict],
            -abs(c.relative) if c.relative is not None else -float("inf"),
        ),
    )
    where = f" {WINDOW_PHRASES.get(top.window, top.window)}" if top.window else ""
    base, new = shown_value(top.baseline.value, top.unit), shown_value(top.tuned.value, top.unit)
    return f"{top.metric}{where} {base} → {new} ({top.verdict})"


def headlines(
    baseline: Sequence[Run], tuned: Sequence[Run], results: Sequence[Comparison]
) -> list[Headline]:
    """One headline per paired experiment, in the order of the baseline."""
    found = []
    for experiment, base, new in pair_experiments(baseline, tuned).pairs:
        mine = [c for c in results if c.experiment == experiment]
        found.append(
            Headline(
                experiment,
                _verdicts(base),
                _verdicts(new),
                _held(base),
                _held(new),
                _main_effect(mine),
            )
        )
    return found
