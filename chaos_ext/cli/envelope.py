"""``gameday envelope``: find the magnitude at which a hypothesis breaks."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from chaoslib import convert_vars, merge_vars
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chaos_ext._core.ledger import default_ledger
from chaos_ext._products.envelope.run import EnvelopeResult, run_envelope
from chaos_ext._products.envelope.search import fmt
from chaos_ext._products.envelope.spec import EnvelopeSettings, apply_magnitude, settings_from
from chaos_ext._runner.execute import EXIT_FAILED, EXIT_HELD, EXIT_INVALID, RunOptions
from chaos_ext._runner.experiments import ExperimentInvalid, validate_experiment
from chaos_ext._runner.run_times import settle_seconds_of
from chaos_ext.cli._common import load_valid_experiments
from chaos_ext.cli._options import (
    abort_plan_of,
    add_abort_options,
    add_var_options,
    alertmanager_url_missing,
)
from chaos_ext.cli.plan import plan_experiment, refusals
from chaos_ext.cli.run import _abort_handlers, recover
from chaos_ext.controls.stop_conditions import AbortPlan
from chaos_ext.errors import InvalidArgument

HELP = """\
Find the breaking point of an experiment's hypothesis: run the WHOLE
experiment (inject, judge, roll back, settle) at one magnitude of one
activity argument at a time, through the same runner as `gameday run` (fault
ledger, rollbacks on every exit path, --abort-on stop conditions):

  1. the mild end (LOW; HIGH with --direction down): if it deviates, the
     answer is "breaks already at LOW", and HIGH is never run;
  2. the harsh end: if it holds, the answer is "holds up to HIGH";
  3. bisection between the harshest magnitude that held and the mildest that
     deviated, until they are within --resolution;
  4. --repeats K more runs at each side of the boundary, alternating.

It reports the harshest magnitude that held, the mildest that deviated, how
many repeats agreed, and every disagreement or non-monotone observation
(a deviation milder than a magnitude that held): "noisy", never hidden.
Runs that are unsteady (hypothesis not met before the fault: nothing was
injected) or failed never count as held or deviated; an unsteady magnitude is
retried (3 in a row stop the search), a failed, aborted or interrupted run or
a rollback that did not complete stops it.

Safety: HIGH (LOW with --direction down) is the blast radius: no run goes
beyond it, and both ends must be given. --max-runs caps the runs (the search
refuses to start when it may need more). Ctrl-C interrupts the current run,
which rolls back, and ends the search; after a kill -9, `gameday rollback`
undoes what the run left.

The settings can sit in the experiment instead, so it stays a standard Chaos
Toolkit file; options override them key by key:

  "extensions": [{"name": "gameday", "envelope": {
      "vary": "hold-dns-tcp.connections=1..40", "resolution": 1,
      "direction": "up", "repeats": 2, "max_runs": 20, "settle_seconds": 20}}]

Writes OUT/envelope.json (rewritten after every run) and one journal per run
in OUT/runs/. `gameday report OUT` draws the envelope, `gameday compare
FRAGILE_OUT TUNED_OUT` says how the breaking point moved, `gameday gate
--journals OUT --min-envelope connections=20` fails a release below a floor.

examples:
  gameday envelope experiments/db-latency.json --vary delay-app-to-db.delay_seconds=0.01..0.8 \\
      --resolution 10% --repeats 2 --settle 30 -o out/latency-fragile
  gameday envelope experiments/sandbox/envelope/dns-tcp-connections.json \\
      --vary hold-idle-tcp-connections-to-dnsmasq.connections=1..40 -o out/dns --label tuned
  gameday envelope experiments/sandbox/envelope/db-headroom.json \\
      --vary take-free-connection-slots.target=0..20 --format 'max-minus-{}' \\
      --direction down --unit "free connections" -o out/headroom
  gameday envelope experiments/sandbox/envelope/dns-tcp-connections.json --dry-run
      # the plan and the worst case, touch nothing

exit code: 0 an answer (a boundary, "breaks already at LOW" or "holds up to
HIGH") with agreeing repeats; 1 noisy (repeats disagree or non-monotone);
2 incomplete (a run failed, was aborted or interrupted, a rollback did not
complete, --max-runs reached); 3 invalid input (nothing was injected);
4 stopped because the system was not in steady state before the faults.
"""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "envelope",
        help="find the magnitude at which a hypothesis breaks",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("experiment", metavar="EXPERIMENT", help="JSON/YAML experiment file")
    parser.add_argument(
        "--vary",
        metavar="ACTIVITY.ARGUMENT=LOW..HIGH",
        help="the method activity's argument and its range (both ends required)",
    )
    parser.add_argument(
        "--resolution",
        metavar="R|P%",
        help="absolute (5) or relative to the boundary (10%%); default 1 for "
        "integer ranges, 5%% otherwise",
    )
    parser.add_argument(
        "--direction",
        choices=("up", "down"),
        help="up (default): larger is harsher; down: smaller is harsher",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        metavar="K",
        help="runs at each side of the boundary at the end (default 2)",
    )
    parser.add_argument("--max-runs", type=int, metavar="N", help="hard cap on runs (default 20)")
    parser.add_argument(
        "--settle",
        type=float,
        metavar="SECONDS",
        dest="settle_seconds",
        help="before each run, wait up to SECONDS for the hypothesis to hold",
    )
    parser.add_argument(
        "--format",
        dest="value_format",
        metavar="TEMPLATE",
        help="render the magnitude into the argument, e.g. 'max-minus-{}'",
    )
    parser.add_argument("--unit", help="unit shown with magnitudes (default from the argument)")
    parser.add_argument("--label", help="name of this envelope in compare (default: file stem)")
    parser.add_argument(
        "-o",
        "--out",
        metavar="DIR",
        help="where envelope.json and runs/ go (default JOURNAL_DIR/envelope-<file name>)",
    )
    parser.add_argument(
        "--journal-dir", metavar="DIR", default=".", help="the parent of the default --out"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="validate, print the plan and the worst case; inject nothing",
    )
    _add_runner_options(parser)
    parser.set_defaults(handler=handle)


def _add_runner_options(parser: argparse.ArgumentParser) -> None:
    add_var_options(parser)
    parser.add_argument(
        "--hypothesis-strategy",
        default="default",
        choices=(
            "default",
            "continuously",
            "during-method-only",
            "after-method-only",
            "before-method-only",
        ),
        help="when the hypothesis is checked in each run (default before/after)",
    )
    parser.add_argument("--hypothesis-frequency", type=float, default=1.0, metavar="SECONDS")
    add_abort_options(parser)  # one firing stops the search
    parser.add_argument(
        "--no-recover", action="store_true", help="refuse to start if a dead run left faults open"
    )


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "vary": args.vary,
        "resolution": args.resolution,
        "direction": args.direction,
        "repeats": args.repeats,
        "max_runs": args.max_runs,
        "settle_seconds": args.settle_seconds,
        "format": args.value_format,
        "unit": args.unit,
        "label": args.label,
    }


def _invalid(console: Console, text: str) -> int:
    console.print(f"[red]invalid:[/] {escape(text)}", highlight=False)
    return EXIT_INVALID


def _check_ends(
    path: Path,
    experiment: dict[str, Any],
    settings: EnvelopeSettings,
    secrets: dict[str, Any],
    config: dict[str, Any],
) -> None:
    """Both ends pass the activity's own validation (nothing runs otherwise)."""
    space = settings.search.space
    for end in (space.low, space.high):
        validate_experiment(path, apply_magnitude(experiment, settings, end), secrets, config)


def _prepare(
    args: argparse.Namespace, console: Console, name: str, overrides: dict[str, Any], out: Path
) -> tuple[Path, dict[str, Any], EnvelopeSettings, RunOptions, AbortPlan | None] | int:
    try:
        config_vars, secret_vars = merge_vars(convert_vars(args.var), args.var_file)
    except ValueError as exc:
        return _invalid(console, f"--var: {exc}")
    loaded = load_valid_experiments([name], console, secret_vars, config_vars)
    if loaded is None:
        return EXIT_INVALID
    ((path, experiment),) = loaded
    try:
        default_settle = settle_seconds_of(experiment)  # {"name": "gameday", "settle_seconds"}
        settings = settings_from(experiment, overrides, path.stem, default_settle)
        _check_ends(path, experiment, settings, secret_vars, config_vars)
        plan = abort_plan_of(args)
        missing = alertmanager_url_missing(plan, experiment, config_vars)
        if missing:
            raise InvalidArgument(missing)
    except (InvalidArgument, ExperimentInvalid) as exc:
        return _invalid(console, str(exc))
    if (out / "envelope.json").exists():
        return _invalid(console, f"{out} already holds an envelope.json: choose another --out")
    base = RunOptions(
        journal_path=out / "runs" / "run.json",
        config_vars=config_vars,
        secret_vars=secret_vars,
        hypothesis_strategy=args.hypothesis_strategy,
        hypothesis_frequency=args.hypothesis_frequency,
    )
    return path, experiment, settings, base, plan


def _plan_text(settings: EnvelopeSettings) -> str:
    space, search = settings.search.space, settings.search
    resolution = f"{space.resolution:.0%}" if space.relative else fmt(space.resolution)
    harsher = "larger" if space.direction == "up" else "smaller"
    return (
        f"vary {settings.vary.text()} ({settings.unit}; {harsher} is harsher): "
        f"mild end {fmt(space.mild)}, harsh end (blast radius) "
        f"{fmt(space.harsh)}, resolution {resolution}, {search.repeats} repeat(s) a side, "
        f"at most {settings.worst_case_runs} runs (cap {search.max_runs}), settle "
        f"{settings.settle_seconds:g} s"
    )


def search_envelope(
    args: argparse.Namespace, console: Console, name: str, overrides: dict[str, Any], out: Path
) -> EnvelopeResult | int:
    """Validate, recover dead runs' faults, search; an int when nothing ran (or a dry run).

    ``args`` carries the runner options (--var, --var-file, --hypothesis-*,
    --abort-on); ``gate`` calls this too.
    """
    prepared = _prepare(args, console, name, overrides, out)
    if isinstance(prepared, int):
        return prepared
    path, experiment, settings, base, plan = prepared
    console.print(
        f"[bold]envelope of {escape(str(path))}[/]: {escape(_plan_text(settings))}", highlight=False
    )
    if getattr(args, "dry_run", False):
        console.print("dry run: nothing was injected")
        return EXIT_HELD
    # as `gameday run`: a privilege a fault needs is asked of its plan before any run
    refused = refusals(path, plan_experiment(experiment, base.config_vars, base.secret_vars))
    for line in refused:
        console.print(f"[red]{escape(line)}[/]", highlight=False)
    if refused:
        return EXIT_INVALID
    ledger = default_ledger()
    if not recover(ledger, console, refuse=getattr(args, "no_recover", False)):
        return EXIT_FAILED
    result = run_envelope(
        path,
        experiment,
        settings,
        base,
        ledger,
        console,
        out,
        handlers=lambda: _abort_handlers(plan, console, base.config_vars),
    )
    _print_result(result.document, console)
    console.print(
        f"envelope: {result.path}; journals: {out / 'runs'}", highlight=False, markup=False
    )
    return result


def handle(args: argparse.Namespace, console: Console) -> int:
    stem = Path(args.experiment).stem
    out = Path(args.out) if args.out else Path(args.journal_dir) / f"envelope-{stem}"
    result = search_envelope(args, console, args.experiment, _overrides(args), out)
    return result if isinstance(result, int) else result.exit_code


def _after_values(run: dict[str, Any]) -> str:
    values = [
        f"{c['probe']}={c['value']:.4g}" if isinstance(c["value"], float) else f"{c['probe']}=?"
        for c in run["hypothesis"]
        if c["phase"] == "after"
    ]
    return ", ".join(values) or "-"


def _print_result(doc: dict[str, Any], console: Console) -> None:
    table = Table(title=f"envelope: {doc['experiment']['title']}", title_justify="left")
    for column in ("run", doc["settings"]["argument"], "phase", "outcome", "after the fault"):
        table.add_column(column, overflow="fold")
    colours = {"held": "green", "deviated": "red"}
    for run in doc["runs"]:
        colour = colours.get(run["outcome"], "yellow")
        table.add_row(
            str(run["run"]),
            escape(str(run["value"])),
            run["phase"],
            f"[{colour}]{run['outcome']}[/]",
            escape(_after_values(run)),
        )
    console.print(table)
    result = doc["result"]
    colour = {"noisy": "yellow", "incomplete": "red"}.get(result["kind"], "green")
    console.print(f"[bold {colour}]{escape(result['summary'])}[/]", highlight=False)
    console.print(f"repeats: {escape(result['agreement'])}", highlight=False)
    for line in result["noisy"]:
        console.print(f"[yellow]runs disagree:[/] {escape(line)}", highlight=False)
    for line in result["non_monotone"]:
        console.print(f"[yellow]non-monotone:[/] {escape(line)}", highlight=False)
    for item in result["not_counted"]:
        console.print(
            f"[dim]not counted: run {item['run']} at {fmt(item['magnitude'])} "
            f"was {item['outcome']}[/]",
            highlight=False,
        )
    if doc.get("note"):
        console.print(f"[yellow]{escape(doc['note'])}[/]", highlight=False)
