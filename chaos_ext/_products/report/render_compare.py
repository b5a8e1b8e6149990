"""The comparison's HTML (inline SVG: time series, distributions) and Markdown renderings.

Each metric's time-series chart draws every run of both sides on the same axes,
each run's times counted from its own first action (the fault's injection, in
the sandbox's experiments), so runs that settled for different lengths of time
line up on their faults; every run's fault windows are shaded as in the
single-run report.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chaos_ext import __version__
from chaos_ext._core.percentile import METHOD
from chaos_ext._products.envelope.render import movement_context
from chaos_ext._products.envelope.view import EnvelopeView, Movement
from chaos_ext._products.report.charts import Trace, comparison_svg, distribution_svg
from chaos_ext._products.report.compare import headlines, judged, metric_samples, pair_experiments
from chaos_ext._products.report.model import RunView
from chaos_ext._products.report.recovery_window import recovery_window
from chaos_ext._products.report.render import environment, paragraphs
from chaos_ext._products.report.stats import Comparison, Settings

__all__ = [
    "ALIGNED",
    "UNALIGNED",
    "compare_html",
    "compare_markdown",
    "series_chart",
    "write_envelope_comparison",
]


def _row(c: Comparison, index: int) -> dict[str, Any]:
    base, tuned = (
        (c.baseline.median, c.tuned.median)
        if c.statistic == "median"
        else (c.baseline.mean, c.tuned.mean)
    )
    relative = f" ({c.relative:+.1%})" if c.relative is not None else ""
    return {
        "c": c,
        "anchor": f"metric-{index + 1}",
        "css": c.verdict.replace(" ", "-"),
        "base": f"{base:.4g}",
        "tuned": f"{tuned:.4g}",
        "diff": f"{c.difference:+.4g}{relative} [{c.ci[0]:+.4g}, {c.ci[1]:+.4g}]",
        "p": f"{c.p_value:.3g}",
        "better": f"{c.better} ({c.better_source})" if c.better else "unknown: set --better",
        "experiment": c.experiment,
        "note": "; ".join(x for x in (c.note, f"test unit: {c.unit}") if x),
        "svg": "",
        "series_svg": "",
    }


ALIGNED = "seconds since each run's first action"
UNALIGNED = "seconds since each run started"


def _origin(view: RunView) -> tuple[float, bool]:
    """Where a run's chart times count from: its first fault window (an action or a
    ledger entry), else its start; and whether it was a window."""
    if view.windows:
        return min(w.start for w in view.windows), True
    firsts = [s.points[0][0] for s in view.series if s.points]
    return (view.start if view.start is not None else min(firsts, default=0.0)), False


def _traces(views: Sequence[RunView], metric: str) -> tuple[list[Trace], bool]:
    traces, aligned = [], True
    for view in views:
        series = next((s for s in view.series if s.name == metric), None)
        if series is None:
            continue
        origin, on_window = _origin(view)
        aligned = aligned and on_window
        traces.append(Trace(series, view.windows, origin, recovery_window(view.recovery)))
    return traces, aligned


def series_chart(
    metric: str, baseline: Sequence[RunView], tuned: Sequence[RunView], salt: str
) -> str:
    """The before/after time-series chart of one metric ("" when no run has it as a series)."""
    base, base_aligned = _traces(baseline, metric)
    new, new_aligned = _traces(tuned, metric)
    if not base and not new:
        return ""
    tolerance = next(
        (v.tolerances[metric] for v in (*tuned, *baseline) if metric in v.tolerances), None
    )
    xlabel = ALIGNED if base_aligned and new_aligned else UNALIGNED
    return comparison_svg(metric, base, new, xlabel, tolerance, salt=salt)


def _context(
    comparisons: Sequence[Comparison],
    baseline: Sequence[RunView],
    tuned: Sequence[RunView],
    settings: Settings,
    title: str,
) -> dict[str, Any]:
    heads = headlines(baseline, tuned, comparisons)
    pairing = pair_experiments(baseline, tuned)
    (baseline, base_left), (tuned, tuned_left) = judged(baseline), judged(tuned)
    base_names, tuned_names = set(metric_samples(baseline)), set(metric_samples(tuned))
    held_b = [sum(h.held_before[0] for h in heads), sum(h.held_before[1] for h in heads)]
    held_t = [sum(h.held_after[0] for h in heads), sum(h.held_after[1] for h in heads)]
    levels = (
        "hierarchical (runs, then samples)"
        if min(len(baseline), len(tuned)) > 1
        else "over samples"
    )
    return {
        "title": title,
        "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "version": __version__,
        "baseline_runs": len(baseline),
        "tuned_runs": len(tuned),
        "left_out": {"baseline": base_left, "tuned": tuned_left},
        "confidence": f"{1 - settings.alpha:.0%}",
        "method": (
            f"bootstrap {levels}, {settings.resamples} resamples, seed {settings.seed}; "
            f"alpha {settings.alpha:g}; minimum effect {settings.min_effect:.0%}; {METHOD}"
        ),
        "rows": [_row(c, i) for i, c in enumerate(comparisons)],
        "headline": f"hypotheses held: {held_b[0]} of {held_b[1]} (baseline) → "
        f"{held_t[0]} of {held_t[1]} (tuned)",
        "headlines": [h.line() for h in heads],
        "unpaired": [
            *(f"{t} (baseline only)" for t in pairing.only_baseline),
            *(f"{t} (tuned only)" for t in pairing.only_tuned),
        ],
        "only_baseline": sorted(base_names - tuned_names),
        "only_tuned": sorted(tuned_names - base_names),
    }


def compare_markdown(
    comparisons: Sequence[Comparison],
    baseline: Sequence[RunView],
    tuned: Sequence[RunView],
    settings: Settings,
    title: str,
) -> str:
    context = _context(comparisons, baseline, tuned, settings, title)
    return paragraphs(environment().get_template("compare.md.j2").render(context))


def compare_html(
    comparisons: Sequence[Comparison],
    baseline: Sequence[RunView],
    tuned: Sequence[RunView],
    settings: Settings,
    title: str,
) -> str:
    context = _context(comparisons, baseline, tuned, settings, title)
    runs = {
        experiment: (judged(b)[0], judged(t)[0])
        for experiment, b, t in pair_experiments(baseline, tuned).pairs
    }
    for i, row in enumerate(context["rows"]):
        name = row["c"].metric
        base_runs, tuned_runs = runs[row["c"].experiment]
        base_samples, tuned_samples = metric_samples(base_runs), metric_samples(tuned_runs)
        before = [v for run in base_samples[name].runs for v in run]
        after = [v for run in tuned_samples[name].runs for v in run]
        row["svg"] = distribution_svg(name, before, after, salt=f"m{i}")
        row["series_svg"] = series_chart(name, base_runs, tuned_runs, salt=f"t{i}")
    return environment().get_template("compare.html.j2").render(context)


def write_envelope_comparison(
    movements: Sequence[Movement], unmatched: Sequence[EnvelopeView], out: Path, title: str
) -> tuple[Path, Path]:
    """``out/envelope-comparison.html`` (the two envelopes overlaid) and ``.md``."""
    out.mkdir(parents=True, exist_ok=True)
    context = {
        "title": title,
        "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "version": __version__,
        "rows": movement_context(movements),
        "unmatched": [f"{v.label}: {v.key}" for v in unmatched],
    }
    html, md = out / "envelope-comparison.html", out / "envelope-comparison.md"
    html.write_text(environment().get_template("compare_envelopes.html.j2").render(context))
    md.write_text(paragraphs(environment().get_template("compare_envelopes.md.j2").render(context)))
    return html, md
