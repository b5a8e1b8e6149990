"""The comparison's HTML (inline SVG) and Markdown renderings.

One section per experiment, titled with it: its headline, then a table of its
metrics window by window (baseline, tuned, the difference with its interval,
the p-value only where a test of independent runs applies, the method, where
the samples came from, the note), then one chart per metric named
``<metric> — <experiment>`` (:mod:`.compare_charts`: the samples compared,
window by window, with each side's compared value drawn over its window).
Metric-windows without a sample on a side are named, grouped by window, with
how long the window lasted. Badges are dark text on a light colour or white on
a dark one, each pair at a WCAG contrast of at least 4.5:1.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from chaos_ext import __version__
from chaos_ext._core.percentile import METHOD
from chaos_ext._core.timeline import WINDOW_WORDS
from chaos_ext._products.envelope.render import movement_context
from chaos_ext._products.envelope.view import EnvelopeView, Movement
from chaos_ext._products.report.compare import (
    Compared,
    Run,
    Skipped,
    judged,
    pair_experiments,
    shown_value,
)
from chaos_ext._products.report.compare_charts import window_chart
from chaos_ext._products.report.headlines import headlines
from chaos_ext._products.report.render import environment, paragraphs
from chaos_ext._products.report.stats import Comparison, Settings

__all__ = ["compare_html", "compare_markdown", "difference_text", "write_envelope_comparison"]


def difference_text(c: Comparison) -> str:
    """``tuned - baseline`` in the metric's unit (a ratio in points), relative, interval."""
    if c.unit == "ratio":
        diff, ends = f"{100 * c.difference:+.3g} pts", "{:+.3g} pts"
        scale = 100.0
    else:
        suffix = shown_value(0, c.unit).removeprefix("0")
        diff, ends, scale = f"{c.difference:+.4g}{suffix}", "{:+.4g}" + suffix, 1.0
    relative = f" ({c.relative:+.1%})" if c.relative is not None else ""
    ci = f" [{ends.format(scale * c.ci[0])}, {ends.format(scale * c.ci[1])}]" if c.ci else ""
    return f"{diff}{relative}{ci}"


def _row(c: Comparison) -> dict[str, Any]:
    return {
        "c": c,
        "css": c.verdict.replace(" ", "-"),
        "window": WINDOW_WORDS.get(c.window, c.window) if c.window else "one value a run",
        "base": shown_value(c.baseline.value, c.unit),
        "tuned": shown_value(c.tuned.value, c.unit),
        "diff": difference_text(c),
        "p": f"{c.p_value:.3g}" if c.p_value is not None else "—",
        "better": f"{c.better} ({c.better_source})" if c.better else "unknown: set --better",
        "samples": f"{c.baseline.n} vs {c.tuned.n} in {c.baseline.runs} vs {c.tuned.runs} run(s)",
    }


def _skipped_lines(skipped: Sequence[Skipped]) -> list[str]:
    """One line per window: its metrics that had no sample on a side, and why."""
    by_window: dict[str, list[Skipped]] = {}
    for s in skipped:
        by_window.setdefault(s.window, []).append(s)
    lines = []
    for window, found in by_window.items():
        names = ", ".join(
            s.metric + (f" (looks back {s.lookback_s:g} s)" if s.lookback_s else "") for s in found
        )
        longest = max(s.longest_s for s in found)
        lines.append(f"{WINDOW_WORDS.get(window, window)}, at most {longest:.1f} s long: {names}")
    return lines


def _metric_sections(
    experiment: str,
    rows: Sequence[Comparison],
    compared: Compared,
    index: int,
    tolerances: Mapping[str, Any] | None,
) -> list[dict[str, Any]]:
    sections = []
    for n, metric in enumerate(dict.fromkeys(c.metric for c in rows)):
        mine = [c for c in rows if c.metric == metric]
        drawn = [d for d in compared.drawn if d.experiment == experiment and d.metric == metric]
        title = f"{metric} — {experiment}"
        svg = ""
        if tolerances is not None:
            tolerance = tolerances.get(metric)
            svg = window_chart(title, drawn, mine, mine[0].unit, tolerance, salt=f"e{index}m{n}")
        sections.append(
            {
                "title": title,
                "anchor": f"e{index}-m{n}",
                "rows": [_row(c) for c in mine],
                "svg": svg,
            }
        )
    return sections


def _experiment(
    experiment: str,
    headline: str,
    index: int,
    compared: Compared,
    tolerances: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """One experiment's section (``tolerances`` None: no charts, for Markdown)."""
    rows = [c for c in compared.rows if c.experiment == experiment]
    b, t = compared.runs[experiment]
    return {
        "title": experiment,
        "anchor": f"e{index}",
        "headline": headline,
        "runs": f"{b} run(s) vs {t}",
        "rows": [_row(c) for c in rows],
        "metrics": _metric_sections(experiment, rows, compared, index, tolerances),
        "skipped": _skipped_lines([s for s in compared.skipped if s.experiment == experiment]),
    }


def _runs_text(counts: Mapping[str, tuple[int, int]], side: int) -> str:
    per = [c[side] for c in counts.values()]
    total = sum(per)
    each = f"{per[0]} each" if len(set(per)) == 1 else "/".join(map(str, per))
    return f"{total} run(s) of {len(per)} experiment(s) ({each})" if per else "0 runs"


def _context(
    compared: Compared,
    baseline: Sequence[Run],
    tuned: Sequence[Run],
    settings: Settings,
    title: str,
    notes: Sequence[str],
    charts: bool = False,
) -> dict[str, Any]:
    heads = headlines(baseline, tuned, compared.rows)
    pairing = pair_experiments(baseline, tuned)
    held_b = [sum(h.held_before[i] for h in heads) for i in (0, 1)]
    held_t = [sum(h.held_after[i] for h in heads) for i in (0, 1)]
    tolerances = {
        name: spec.tolerance for run in (*tuned, *baseline) for name, spec in run.specs.items()
    }
    experiments = [
        _experiment(experiment, head.line(), i, compared, tolerances if charts else None)
        for i, (head, (experiment, _, _)) in enumerate(zip(heads, pairing.pairs, strict=True))
    ]
    return {
        "title": title,
        "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "version": __version__,
        "baseline_runs": _runs_text(compared.runs, 0),
        "tuned_runs": _runs_text(compared.runs, 1),
        "left_out": {"baseline": judged(baseline)[1], "tuned": judged(tuned)[1]},
        "confidence": f"{1 - settings.alpha:.0%}",
        "method": (
            f"bootstrap: {settings.resamples} resamples, seed {settings.seed}; alpha "
            f"{settings.alpha:g}; minimum effect {settings.min_effect:.0%}; {METHOD}"
        ),
        "notes": list(notes),
        "experiments": experiments,
        "headline": f"hypotheses held: {held_b[0]} of {held_b[1]} (baseline) → "
        f"{held_t[0]} of {held_t[1]} (tuned)",
        "headlines": [h.line() for h in heads],
        "unpaired": [
            *(f"{t} (baseline only)" for t in pairing.only_baseline),
            *(f"{t} (tuned only)" for t in pairing.only_tuned),
        ],
    }


def compare_markdown(
    compared: Compared,
    baseline: Sequence[Run],
    tuned: Sequence[Run],
    settings: Settings,
    title: str,
    notes: Sequence[str] = (),
) -> str:
    context = _context(compared, baseline, tuned, settings, title, notes)
    return paragraphs(environment().get_template("compare.md.j2").render(context))


def compare_html(
    compared: Compared,
    baseline: Sequence[Run],
    tuned: Sequence[Run],
    settings: Settings,
    title: str,
    notes: Sequence[str] = (),
) -> str:
    context = _context(compared, baseline, tuned, settings, title, notes, charts=True)
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
