"""``gameday compare``: baseline vs tuned runs, per metric, with statistics."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from chaos_ext._products.envelope.view import EnvelopeView, movement, pair_envelopes
from chaos_ext._runner.execute import EXIT_DEVIATED, EXIT_INVALID
from chaos_ext.cli._journals import load_envelopes, load_views

if TYPE_CHECKING:
    from chaos_ext._products.report.model import RunView
    from chaos_ext._products.report.stats import Comparison, Settings

HELP = """\
Compare runs before and after a tuning change. BASELINE and TUNED are journal
files, folders of journals, or report folders (`make demo`'s, `sandbox run`'s:
their journals are read from run/, else journals/); --baseline/--tuned add
more runs to either side. Runs are paired by experiment title (else by journal
file name); experiments found on one side only are named.

First the answer: hypotheses held on each side, then per experiment its
verdict before → after and the metric that moved most, in its own values.
Then, for each metric both sides of an experiment share (every probe with
numeric or true/false output, by name), both distributions, the difference of
the median (mean for true/false and mostly-zero metrics) tuned - baseline with
a bootstrap confidence interval, the Mann-Whitney U p-value, and one verdict
by one rule: improved / regressed when the interval excludes 0 AND p < alpha
AND the change reaches --min-effect; no change when neither finds a
difference; inconclusive when they disagree (the note says so); changed when
which way is better is unknown; "direction only: 10 → 0 in 1 run(s) vs 1;
run --repeat N" when a side has fewer than 3 independent observations. The
test's unit is one independent observation: each run's time series is thinned
by its lag-1 autocorrelation first (docs/reporting.md).
Which way is better: --better NAME=lower|higher, else the probe catalog
(`gameday catalog`), else the probe's tolerance, else the metric's name
(errors, latency, drops, refusals, timeouts: lower; success, headroom, hits:
higher).

Writes OUT/comparison.html (inline SVG: per metric, every run of both sides
on one time-series chart, lined up on each run's first action, fault windows
shaded; and both distributions) and OUT/comparison.md. One run a side gives
the direction only: `gameday run --repeat N` (`sandbox run --repeat N`,
`scripts/demo.sh tuned --repeat N`) gives the test the runs to decide.

Envelopes (`gameday envelope` OUT folders, their envelope.json, or a folder of
such folders) are compared instead by how the breaking point moved, paired by
the varied argument:

  delay-app-to-db.delay_seconds: breaks between 0.04 and 0.05 s (fragile) →
  between 0.38 and 0.42 s (tuned) — improved (fragile: held 3/3 at 0.04;
  deviated 3/3 at 0.05; tuned: held 3/3 at 0.38; deviated 3/3 at 0.42)

improved: the tuned side held at a magnitude as harsh as one where the
baseline deviated; regressed: the other way round; no change: the boundary
intervals overlap; inconclusive: a side is noisy (repeats disagree) or
incomplete. Writes OUT/envelope-comparison.html (both envelopes on one chart)
and OUT/envelope-comparison.md.

examples:
  gameday compare reports/gameday-…-fragile reports/gameday-…-tuned -o reports/tuning/
  gameday run --repeat 5 --journal-dir before/ exp.json   # then, after the change, after/
  gameday compare before/ after/ -o reports/pool-size/
  gameday compare base-1.json tuned-1.json --baseline base-2.json --tuned tuned-2.json -o out/
  gameday compare before/ after/ -o out/ --better p99-latency=lower --fail-on-regression
  gameday compare out/dns-fragile out/dns-tuned -o reports/dns-envelope/

exit code: 0; 1 with --fail-on-regression when a metric (or a breaking point)
regressed; 3 invalid input.
"""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "compare",
        help="baseline vs tuned runs: per-metric differences with CIs",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("baseline", metavar="BASELINE", help="journal or folder of journals")
    parser.add_argument("tuned", metavar="TUNED", help="journal or folder of journals")
    parser.add_argument(
        "--baseline",
        dest="more_baseline",
        action="append",
        default=[],
        metavar="JOURNAL",
        help="another baseline run (repeatable)",
    )
    parser.add_argument(
        "--tuned",
        dest="more_tuned",
        action="append",
        default=[],
        metavar="JOURNAL",
        help="another tuned run (repeatable)",
    )
    parser.add_argument("-o", "--output", required=True, metavar="DIR")
    parser.add_argument("--title", default="Tuning comparison")
    parser.add_argument(
        "--better",
        action="append",
        default=[],
        metavar="NAME=lower|higher",
        help="which way is better for a metric (repeatable)",
    )
    parser.add_argument("--alpha", type=float, default=0.05, help="significance (default 0.05)")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (reproducible)")
    parser.add_argument(
        "--min-effect",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="smallest relative change that counts (e.g. 0.05)",
    )
    parser.add_argument(
        "--statistic",
        choices=("auto", "median", "mean"),
        default="auto",
        help="auto: the median; the mean for true/false metrics and for mostly-zero ones "
        "(equal medians, distributions that differ)",
    )
    parser.add_argument(
        "--fail-on-regression", action="store_true", help="exit 1 when any metric regressed"
    )
    parser.set_defaults(handler=handle)


def _overrides(items: list[str], console: Console) -> dict[str, str] | None:
    found = {}
    for item in items:
        name, _, better = item.rpartition("=")
        if not name or better not in ("lower", "higher"):
            console.print(f"[red]--better {escape(item)}: expected NAME=lower or NAME=higher[/]")
            return None
        found[name] = better
    return found


def _settings(args: argparse.Namespace, console: Console) -> Settings | None:
    if not 0 < args.alpha < 1 or args.resamples < 100 or args.min_effect < 0:
        console.print("[red]need 0 < --alpha < 1, --resamples >= 100, --min-effect >= 0[/]")
        return None
    from chaos_ext._products.report.stats import Settings  # noqa: PLC0415 - scipy is heavy

    return Settings(args.alpha, args.resamples, args.seed, args.min_effect, args.statistic)


def _compare_envelopes(
    args: argparse.Namespace,
    console: Console,
    base: list[EnvelopeView],
    tuned: list[EnvelopeView],
) -> int:
    from chaos_ext._products.report.render_compare import (  # noqa: PLC0415 - matplotlib is heavy
        write_envelope_comparison,
    )

    pairs, unmatched = pair_envelopes(base, tuned)
    if not pairs:
        console.print("[red]no envelope of the same argument on both sides: nothing to compare[/]")
        return EXIT_INVALID
    moves = [movement(b, t) for b, t in pairs]
    for m in moves:
        console.print(m.line(), highlight=False, markup=False, soft_wrap=True)
    for view in unmatched:
        console.print(
            f"not compared: {view.label}: {view.key} (only on one side)",
            highlight=False,
            markup=False,
        )
    title = args.title if args.title != "Tuning comparison" else "How the breaking points moved"
    html, md = write_envelope_comparison(moves, unmatched, Path(args.output), title)
    console.print(f"comparison: {html}, {md}", highlight=False)
    regressed = any(m.verdict == "regressed" for m in moves)
    return EXIT_DEVIATED if regressed and args.fail_on_regression else 0


def _say_headline(
    base: list[RunView], tuned: list[RunView], results: list[Comparison], console: Console
) -> None:
    """First the answer: hypotheses held on each side, then one line per experiment."""
    from chaos_ext._products.report.compare import headlines  # noqa: PLC0415 - scipy is heavy

    heads = headlines(base, tuned, results)
    held_b = (sum(h.held_before[0] for h in heads), sum(h.held_before[1] for h in heads))
    held_t = (sum(h.held_after[0] for h in heads), sum(h.held_after[1] for h in heads))
    console.print(
        f"hypotheses held: {held_b[0]} of {held_b[1]} (baseline) → "
        f"{held_t[0]} of {held_t[1]} (tuned)",
        highlight=False,
        markup=False,
    )
    for head in heads:
        console.print(f"  {head.line()}", highlight=False, markup=False)


def handle(args: argparse.Namespace, console: Console) -> int:
    base_env = load_envelopes([args.baseline, *args.more_baseline], console)
    tuned_env = load_envelopes([args.tuned, *args.more_tuned], console)
    if base_env is None or tuned_env is None:
        return EXIT_INVALID
    if base_env[0] or tuned_env[0]:
        return _compare_envelopes(args, console, base_env[0], tuned_env[0])
    overrides = _overrides(args.better, console)
    settings = _settings(args, console)
    base = load_views([args.baseline, *args.more_baseline], console)
    tuned = load_views([args.tuned, *args.more_tuned], console)
    if overrides is None or settings is None or base is None or tuned is None:
        return EXIT_INVALID
    from chaos_ext._products.report.compare import (  # noqa: PLC0415 - scipy is heavy
        compare_sets,
        pair_experiments,
    )
    from chaos_ext._products.report.render_compare import (  # noqa: PLC0415 - matplotlib too
        compare_html,
        compare_markdown,
    )

    base_views, tuned_views = [v for _, v in base], [v for _, v in tuned]
    left_out = sum(v.outcome == "unsteady" for v in (*base_views, *tuned_views))
    if left_out:
        console.print(
            f"[yellow]{left_out} unsteady run(s) left out: the steady state did not hold "
            "before the method, so nothing was injected in them[/]"
        )
    results = compare_sets(base_views, tuned_views, overrides, settings)
    pairing = pair_experiments(base_views, tuned_views)
    for title in pairing.only_baseline:
        console.print(f"not paired: {title} (baseline only)", highlight=False, markup=False)
    for title in pairing.only_tuned:
        console.print(f"not paired: {title} (tuned only)", highlight=False, markup=False)
    if not results:
        console.print("[red]the two sets share no numeric metric: nothing to compare[/]")
        return EXIT_INVALID
    _say_headline(base_views, tuned_views, results, console)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    md = compare_markdown(results, base_views, tuned_views, settings, args.title)
    (out / "comparison.md").write_text(md)
    html = compare_html(results, base_views, tuned_views, settings, args.title)
    (out / "comparison.html").write_text(html)
    for c in results:
        note = f"; {c.note}" if c.note else ""
        console.print(
            f"{c.metric}: {c.verdict} ({c.statistic} {c.difference:+.4g}, "
            f"CI [{c.ci[0]:+.4g}, {c.ci[1]:+.4g}], p={c.p_value:.3g}{note})",
            highlight=False,
            markup=False,
        )
    console.print(f"comparison: {out / 'comparison.html'}, {out / 'comparison.md'}")
    regressed = any(c.verdict == "regressed" for c in results)
    return EXIT_DEVIATED if regressed and args.fail_on_regression else 0
