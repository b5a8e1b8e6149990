"""``gameday gate``: run experiments (or read journals) for a CI pipeline; JUnit + exit code."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from chaos_ext.cli._journals import load_views
from chaos_ext.cli.run import add_run_options, run_batch
from chaos_ext.reporting.junit import junit_xml
from chaos_ext.reporting.model import RunView, redact_journal, view_of
from chaos_ext.reporting.score import resilience_score
from chaos_ext.runner.verdict import (
    EXIT_DEVIATED,
    EXIT_HELD,
    EXIT_INVALID,
    exit_code_for,
    outcome_of,
    worst_exit,
)

HELP = """\
A pre-release gate: run experiments like `gameday run` (rollbacks on every exit
path, ledger sweep, --abort-on stop conditions), or read journals of earlier
runs (--journals), then write JUnit XML for the CI system and exit with the
gate's verdict.

JUnit: one test suite per experiment; one test case per hypothesis probe per
phase ("p99-latency [after]") whose <failure> carries the measured value
against the tolerance, one "steady state held" case per experiment and one
"faults rolled back" case (an <error> naming what may still be injected when
a rollback did not complete). An unsteady run (the steady state did not hold
before the method, so nothing was injected) is an <error> saying so. With
--min-score, a "gameday.score" suite too.

exit code: the most severe over all experiments (2 > 1 > 4 > 0): 0 every
hypothesis held, 1 a hypothesis deviated, 2 a run failed/was interrupted or a
rollback did not complete (rollback-failed), 3 invalid input, 4 unsteady. With
--min-score N, deviations are judged by the resilience score instead (the
weighted share of hypotheses held; unsteady runs are left out of it): 1 when
the score is below N (or there is no hypothesis to score), else 0; failed,
rollback-failed and unsteady runs still give 2 or 4.

examples:
  gameday gate experiments/db-latency.json --junit out/gameday.xml
  gameday gate --journals out/journal-*.json --junit gameday.xml --min-score 80
  gameday gate experiments/*.json --var prometheus_url=http://prom:9090 --junit j.xml
"""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "gate", help="run experiments as a CI gate: JUnit XML + exit code", description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("inputs", nargs="+", metavar="EXPERIMENT", help="experiment files")
    parser.add_argument("--junit", required=True, metavar="FILE", help="JUnit XML to write")
    parser.add_argument(
        "--journals", action="store_true",
        help="the arguments are journals (or folders of them) of earlier runs: run nothing",
    )  # fmt: skip
    parser.add_argument(
        "--min-score", type=float, metavar="N",
        help="pass deviations while the resilience score (0-100) is at least N",
    )  # fmt: skip
    add_run_options(parser)  # --journal-dir, --var, --var-file, --hypothesis-*, --abort-on
    parser.set_defaults(handler=handle)


def _run_all(args: argparse.Namespace, console: Console) -> list[tuple[RunView, int]] | int:
    out = Path(args.journal_dir)
    results = run_batch(
        args, args.inputs, console, lambda path: out / f"journal-{path.stem}.json",
        refuse_recover=False,
    )  # fmt: skip
    if isinstance(results, int):
        return results
    return [
        (view_of(redact_journal(r.journal), source=str(r.journal_path)), r.exit_code)
        for r in results
    ]


def _from_journals(args: argparse.Namespace, console: Console) -> list[tuple[RunView, int]] | int:
    loaded = load_views(args.inputs, console)
    if loaded is None:
        return EXIT_INVALID
    found = []
    for journal, view in loaded:
        # recomputed, not trusted from the file: a journal from an older gameday
        # may have recorded exit 0 for a rollback that failed
        found.append((view, exit_code_for(view.outcome or outcome_of(journal))))
    return found


def handle(args: argparse.Namespace, console: Console) -> int:
    if args.min_score is not None and not 0 <= args.min_score <= 100:
        console.print(f"[red]--min-score must be within 0..100, got {args.min_score:g}[/]")
        return EXIT_INVALID
    outcome = _from_journals(args, console) if args.journals else _run_all(args, console)
    if isinstance(outcome, int):
        return outcome
    views = [view for view, _ in outcome]
    score = resilience_score(views)
    junit = Path(args.junit)
    junit.parent.mkdir(parents=True, exist_ok=True)
    junit.write_bytes(junit_xml(views, score, args.min_score))
    codes = [code for _, code in outcome]
    console.print(f"resilience score: {score.text()}; JUnit: {junit}", highlight=False)
    hard = [c for c in codes if c not in (EXIT_HELD, EXIT_DEVIATED)]
    if args.min_score is None or hard:
        return worst_exit(hard or codes)
    if score.value is None or score.value < args.min_score:
        console.print(f"[red]resilience score below the minimum {args.min_score:g}[/]")
        return EXIT_DEVIATED
    return 0
