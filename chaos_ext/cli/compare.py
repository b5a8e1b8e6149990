"""``gameday compare``: baseline vs tuned runs, per metric, with statistics."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from chaos_ext._core.timeline import WINDOW_PHRASES
from chaos_ext._products.envelope.view import EnvelopeView, movement, pair_envelopes
from chaos_ext._runner.execute import EXIT_DEVIATED, EXIT_INVALID
from chaos_ext.cli._journals import load_envelopes, load_views

if TYPE_CHECKING:
    from chaos_ext._products.report.compare import Compared, Run
    from chaos_ext._products.report.stats import Settings

HELP = """\
Compare runs before and after a tuning change, like with like. BASELINE and
TUNED are journal files, folders of journals, or report folders (`make demo`'s,
`sandbox run`'s: their journals are read from run/, else journals/);
--baseline/--tuned add more runs to either side. Runs are paired by experiment
title (else by journal file name); experiments found on one side only are named.

First the answer: hypotheses held on each side, then per experiment its verdict
before → after and the fault-window effect that moved most, in its own values.
Then each metric both sides of an experiment share is compared WINDOW BY WINDOW
of the runs' timelines (gameday.timeline): before the faults (baseline) against
the other side's baseline, during them (the fault window: the first fault on to
the last one off) against the other's fault window, after the undo (recovery)
against the other's recovery; plus time-to-recover-s, one value a run. A sample
counts in a window when what it measured lies inside it: a PromQL sample at t
with rate(x[5s]) measured (t-5s, t]. The samples of a PromQL probe's metric are
a range query at the scrape step in the run's Prometheus (its configuration's
prometheus_url, or --prometheus-url); when that Prometheus is unreachable, does
not hold the run or has dropped the range, the journal's own samples in the
window, and a note says so (--offline: always the journals').

The method follows what the samples are, and every row says which:
  time series (one run a side, or up to 3): successive samples are not
    independent, so no p-value; the difference of the medians with a
    moving-block bootstrap interval; improved/regressed when the interval
    excludes 0 and either the windows' middle 90 % ranges do not overlap or
    each side holds at least 3 independent observations;
  independent runs (4 or more a side): one median a run, Mann-Whitney U on
    them and a bootstrap over the runs; improved/regressed when the interval
    excludes 0 AND p < alpha (disagreeing: inconclusive);
  one value a run with fewer runs: "direction only: 10 → 0 (improved) in 1
    run(s) vs 1; run --repeat 4".
A window with fewer than 5 samples on a side, or too few independent ones to
tell, says "too short" and why; a time-to-recover-s difference smaller than one
check of the hypothesis is "no change", at the measurement's resolution; with
--min-effect, a smaller change is "no change"; "changed" when which way is
better is unknown. Which way is better: --better NAME=lower|higher, else the
probe catalog (`gameday catalog`), else the probe's tolerance, else the
metric's name (errors, latency, drops: lower; success, headroom: higher).

Writes OUT/comparison.html (a section per experiment, titled with it: the
table, then per metric the samples compared, window by window, each side's
compared value drawn over its window) and OUT/comparison.md.

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
  gameday run --repeat 5 --journal-dir before/ experiments/db-latency.json
      # then, after the change, the same with --journal-dir after/
  gameday compare before/ after/ -o reports/pool-size/
  gameday compare base-1.json tuned-1.json --baseline base-2.json --tuned tuned-2.json -o out/
  gameday compare before/ after/ -o out/ --better p99-latency=lower --fail-on-regression
  gameday compare before/ after/ -o out/ --prometheus-url http://prometheus.monitoring:9090
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
        "(equal medians, samples that differ)",
    )
    parser.add_argument(
        "--prometheus-url",
        metavar="URL",
        help="the Prometheus that holds both sides' samples (default: each run's own "
        "prometheus_url)",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="do not ask Prometheus: compare the samples the journals hold",
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
    console.print(f"comparison: {html}, {md}", highlight=False, markup=False)
    regressed = any(m.verdict == "regressed" for m in moves)
    return EXIT_DEVIATED if regressed and args.fail_on_regression else 0


def _say_results(
    base: list[Run], tuned: list[Run], compared: Compared, notes: list[str], console: Console
) -> None:
    """First the answer (hypotheses held, one line per experiment), then where the
    samples came from, then each experiment's rows."""
    from chaos_ext._products.report.compare import shown_value  # noqa: PLC0415 - scipy
    from chaos_ext._products.report.headlines import headlines  # noqa: PLC0415
    from chaos_ext._products.report.render_compare import (  # noqa: PLC0415 - matplotlib
        difference_text,
    )

    heads = headlines(base, tuned, compared.rows)
    held_b = (sum(h.held_before[0] for h in heads), sum(h.held_before[1] for h in heads))
    held_t = (sum(h.held_after[0] for h in heads), sum(h.held_after[1] for h in heads))
    say = _plain(console)
    held = f"{held_b[0]} of {held_b[1]} (baseline) → {held_t[0]} of {held_t[1]} (tuned)"
    say(f"hypotheses held: {held}")
    for head in heads:
        say(f"  {head.line()}")
    for note in notes:
        say(f"note: {note}")
    for head in heads:
        say(f"{head.experiment}:")
        for c in (c for c in compared.rows if c.experiment == head.experiment):
            where = f", {WINDOW_PHRASES.get(c.window, c.window)}" if c.window else ""
            p = f", p={c.p_value:.3g}" if c.p_value is not None else ""
            note = f"; {c.note}" if c.note else ""
            method = c.method.split(":", 1)[0]
            values = (
                f"{shown_value(c.baseline.value, c.unit)} → {shown_value(c.tuned.value, c.unit)}"
            )
            effect = f"{values}, {difference_text(c)}{p}; {method}{note}"
            say(f"  {c.metric}{where}: {c.verdict} ({effect})")


def _say_left_out(base: list[Run], tuned: list[Run], console: Console) -> None:
    left_out = sum(r.view.outcome == "unsteady" for r in (*base, *tuned))
    if left_out:
        console.print(
            f"[yellow]{left_out} unsteady run(s) left out: the steady state did not hold "
            "before the method, so nothing was injected in them[/]"
        )


def _plain(console: Console) -> Any:
    def say(text: str) -> None:
        console.print(text, highlight=False, markup=False, soft_wrap=True)

    return say


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
        Run,
        compare_sets,
        pair_experiments,
    )
    from chaos_ext._products.report.prometheus_windows import (  # noqa: PLC0415
        WindowSampler,
    )
    from chaos_ext._products.report.render_compare import (  # noqa: PLC0415 - matplotlib too
        compare_html,
        compare_markdown,
    )
    from chaos_ext._products.report.windows import metric_specs  # noqa: PLC0415

    base_runs = [Run(j, v, metric_specs(j, v)) for j, v in base]
    tuned_runs = [Run(j, v, metric_specs(j, v)) for j, v in tuned]
    _say_left_out(base_runs, tuned_runs, console)
    sampler = WindowSampler(url=args.prometheus_url, offline=args.offline)
    compared = compare_sets(base_runs, tuned_runs, overrides, settings, sampler)
    pairing = pair_experiments(base_runs, tuned_runs)
    say = _plain(console)
    for title in pairing.only_baseline:
        say(f"not paired: {title} (baseline only)")
    for title in pairing.only_tuned:
        say(f"not paired: {title} (tuned only)")
    if not compared.rows:
        console.print("[red]the two sets share no numeric metric: nothing to compare[/]")
        return EXIT_INVALID
    notes = [*sampler.notes]
    if sampler.used == {"journal"} and not args.offline:
        notes.append("every sample came from the journals (no Prometheus answered for them)")
    _say_results(base_runs, tuned_runs, compared, notes, console)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    pages = {"comparison.md": compare_markdown, "comparison.html": compare_html}
    for name, render in pages.items():
        (out / name).write_text(
            render(compared, base_runs, tuned_runs, settings, args.title, notes)
        )
    console.print(f"comparison: {out / 'comparison.html'}, {out / 'comparison.md'}", markup=False)
    regressed = any(c.verdict == "regressed" for c in compared.rows)
    return EXIT_DEVIATED if regressed and args.fail_on_regression else 0
