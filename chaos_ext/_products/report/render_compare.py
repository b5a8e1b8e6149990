"""The comparison's HTML (inline SVG distributions) and Markdown renderings."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chaos_ext import __version__
from chaos_ext._core.percentile import METHOD
from chaos_ext._products.envelope.render import movement_context
from chaos_ext._products.envelope.view import EnvelopeView, Movement
from chaos_ext._products.report.charts import distribution_svg
from chaos_ext._products.report.compare import headlines, judged, metric_samples, pair_experiments
from chaos_ext._products.report.model import RunView
from chaos_ext._products.report.render import environment, paragraphs
from chaos_ext._products.report.stats import Comparison, Settings

__all__ = ["compare_html", "compare_markdown", "write_envelope_comparison"]


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
    }


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
    samples = {
        experiment: (metric_samples(judged(b)[0]), metric_samples(judged(t)[0]))
        for experiment, b, t in pair_experiments(baseline, tuned).pairs
    }
    for i, row in enumerate(context["rows"]):
        name = row["c"].metric
        base_samples, tuned_samples = samples[row["c"].experiment]
        before = [v for run in base_samples[name].runs for v in run]
        after = [v for run in tuned_samples[name].runs for v in run]
        row["svg"] = distribution_svg(name, before, after, salt=f"m{i}")
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
