"""``gameday gate``: run experiments (or read journals) for a CI pipeline; JUnit + exit code."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from chaos_ext._products.envelope.view import EnvelopeView
from chaos_ext._products.report.junit import junit_xml
from chaos_ext._products.report.model import RunView, redact_journal, view_of
from chaos_ext._products.report.score import Score, resilience_score
from chaos_ext._runner.verdict import (
    EXIT_DEVIATED,
    EXIT_FAILED,
    EXIT_HELD,
    EXIT_INVALID,
    EXIT_NOT_RECOVERED,
    exit_code_for,
    outcome_of,
    worst_exit,
)
from chaos_ext.cli._envelope_gate import Floors, envelope_suite, parse_floors, search_envelopes
from chaos_ext.cli._journals import load_envelopes, load_views
from chaos_ext.cli.run import add_run_options, run_batch

HELP = """\
A pre-release gate: run experiments like `gameday run` (rollbacks on every exit
path, ledger sweep, --abort-on stop conditions), or read journals of earlier
runs (--journals), then write JUnit XML for the CI system and exit with the
gate's verdict.

A gate must measure something: an experiment without a steady-state
hypothesis, or --hypothesis-strategy skip, is refused (exit 3, one line).
An experiment a batch did not start because an earlier one was aborted or
interrupted is "not-run": a JUnit <error> naming why, and it counts in the
score as not held. A journal of a run that went without a safety control
(--allow-missing-controls) fails the gate (exit 2) unless `gate
--allow-missing-controls` is given too; its JUnit suite has the property
"unprotected".

JUnit: one test suite per experiment; one test case per hypothesis probe per
phase ("p99-latency [after]") whose <failure> carries the measured value
against the tolerance, one "steady state held" case per experiment and one
"faults rolled back" case (an <error> naming what may still be injected when
a rollback did not complete). An unsteady run (the steady state did not hold
before the method, so nothing was injected) is an <error> saying so. With
--min-score, a "gameday.score" suite too.

With --max-recovery SECONDS, a run that injected a fault must have held its
steady state again within SECONDS of the undo (gameday.recovery), else exit 5.

exit code: the most severe over all experiments (2 > 5 > 1 > 4 > 0): 0 every
hypothesis held, 1 a hypothesis deviated, 2 a run failed/was interrupted or a
rollback did not complete (rollback-failed), 3 invalid input, 4 unsteady. With
--min-score N, deviations are judged by the resilience score instead (the
weighted share of hypotheses held; unsteady runs are left out of it): 1 when
the score is below N (or there is no hypothesis to score), else 0; failed,
rollback-failed and unsteady runs still give 2 or 4.

With --min-envelope ARGUMENT=FLOOR, envelopes are gated too: experiments with
an envelope setting ({"name": "gameday", "envelope": {"vary": ...}}) are
searched like `gameday envelope` (into JOURNAL_DIR/envelope-<file name>/), or,
with --journals, envelopes written earlier (their OUT folders) are read. Each
envelope varying
ARGUMENT (or ACTIVITY.ARGUMENT) must show the hypothesis holding at FLOOR or
harsher: a magnitude there where every run held, and no run deviating at it
or at any milder magnitude (so disagreeing repeats below the floor fail it).
An incomplete search fails. One case per envelope in the "gameday.envelope"
suite; exit 1 when one fails (2 when its search was cut short by a failed
run), 3 when no envelope varies ARGUMENT.

examples:
  gameday gate experiments/db-latency.json --junit out/gameday.xml
  gameday gate --journals out/journal-*.json --junit gameday.xml --min-score 80
  gameday gate experiments/*.json --var prometheus_url=http://prom:9090 --junit j.xml
  gameday gate --journals out/latency-tuned --min-envelope delay_seconds=0.2 --junit j.xml
  gameday gate experiments/sandbox/envelope/dns-tcp-connections.json \\
      --min-envelope connections=30 --junit j.xml
"""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "gate",
        help="run experiments as a CI gate: JUnit XML + exit code",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("inputs", nargs="+", metavar="EXPERIMENT", help="experiment files")
    parser.add_argument("--junit", required=True, metavar="FILE", help="JUnit XML to write")
    parser.add_argument(
        "--journals",
        action="store_true",
        help="the arguments are journals (or folders of them) of earlier runs: run nothing",
    )
    parser.add_argument(
        "--min-score",
        type=float,
        metavar="N",
        help="pass deviations while the resilience score (0-100) is at least N",
    )
    parser.add_argument(
        "--min-envelope",
        action="append",
        default=[],
        metavar="ARGUMENT=FLOOR",
        help="envelopes of ARGUMENT (searched for experiments that set one, or read with "
        "--journals) must show the hypothesis holding at FLOOR or harsher (repeatable)",
    )
    parser.add_argument(
        "--max-recovery",
        type=float,
        metavar="SECONDS",
        help="fail (exit 5) a run whose system took longer than SECONDS to hold its steady "
        "state again after the undo, or whose recovery was not measured",
    )
    add_run_options(parser)  # --journal-dir, --var, --var-file, --hypothesis-*, --abort-on
    parser.set_defaults(handler=handle)


def nothing_measured(strategy: str) -> Callable[[Path, dict[str, Any]], str | None]:
    """A gate must measure something: refuse an experiment without a steady-state
    hypothesis (or without probes in it), and a hypothesis strategy that checks nothing."""

    def refuse(path: Path, experiment: dict[str, Any]) -> str | None:
        hypothesis = experiment.get("steady-state-hypothesis")
        probes = hypothesis.get("probes") if isinstance(hypothesis, dict) else None
        if strategy == "skip":
            return (
                f"gate: {path}: --hypothesis-strategy skip checks nothing: a gate needs a "
                "steady-state hypothesis checked (use `gameday run` to explore)"
            )
        if not probes:
            return (
                f"gate: {path}: no steady-state hypothesis (or none with probes): a gate "
                "would pass with nothing measured (use `gameday run` to explore)"
            )
        return None

    return refuse


def _run_all(args: argparse.Namespace, console: Console) -> list[tuple[RunView, int]] | int:
    out = Path(args.journal_dir)
    results = run_batch(
        args,
        args.inputs,
        console,
        lambda path: out / f"journal-{path.stem}.json",
        refuse_recover=False,
        refuse=nothing_measured(args.hypothesis_strategy),
    )
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
        code = exit_code_for(view.outcome or outcome_of(journal))
        if view.unprotected and not args.allow_missing_controls:
            console.print(
                f"[red]{escape(view.source)}: ran without a safety control "
                f"({escape('; '.join(view.unprotected))}): failed (gate "
                "--allow-missing-controls accepts it)[/]",
                highlight=False,
            )
            code = worst_exit([code, EXIT_FAILED])
        found.append((view, code))
    return found


def _envelopes(
    args: argparse.Namespace, console: Console
) -> tuple[list[EnvelopeView], Floors] | int:
    """The envelopes (searched now, or among --journals inputs) and the floors;
    args.inputs keeps the rest."""
    floors = parse_floors(args.min_envelope, console)
    if floors is None:
        return EXIT_INVALID
    if not args.journals:
        if not floors:
            return [], floors
        searched = search_envelopes(args, console)
        return searched if isinstance(searched, int) else (searched, floors)
    loaded = load_envelopes(args.inputs, console)
    if loaded is None:
        return EXIT_INVALID
    views, args.inputs = loaded
    if views and not floors:
        console.print(
            "[red]envelopes given: say which floor to hold with --min-envelope ARGUMENT=FLOOR[/]"
        )
        return EXIT_INVALID
    return views, floors


def handle(args: argparse.Namespace, console: Console) -> int:
    if args.min_score is not None and not 0 <= args.min_score <= 100:
        console.print(f"[red]--min-score must be within 0..100, got {args.min_score:g}[/]")
        return EXIT_INVALID
    envelopes = _envelopes(args, console)
    if isinstance(envelopes, int):
        return envelopes
    outcome: list[tuple[RunView, int]] | int = []
    if args.inputs:
        outcome = _from_journals(args, console) if args.journals else _run_all(args, console)
    if isinstance(outcome, int):
        return outcome
    if args.max_recovery is not None:
        outcome = [(v, _slow_recovery(v, code, args.max_recovery, console)) for v, code in outcome]
    views = [view for view, _ in outcome]
    score = resilience_score(views)
    extra, floor_code = [], EXIT_HELD
    if envelopes[1]:
        suite, floor_code = envelope_suite(envelopes[0], envelopes[1], console)
        extra.append(suite)
    junit = Path(args.junit)
    junit.parent.mkdir(parents=True, exist_ok=True)
    junit.write_bytes(junit_xml(views, score, args.min_score, extra))
    if floor_code == EXIT_INVALID:
        return EXIT_INVALID
    console.print(f"resilience score: {score.text()}; JUnit: {escape(str(junit))}", highlight=False)
    return _verdict(args, score, [code for _, code in outcome], floor_code, console)


def _slow_recovery(view: RunView, code: int, limit: float, console: Console) -> int:
    """``--max-recovery``: a run that injected something must have come back within it."""
    if view.outcome in ("unsteady", "not-run", "refused") or not view.injected:
        return code
    took = view.time_to_recover_s
    if took is not None and took <= limit:
        return code
    unmeasured = (view.recovery or {}).get("why", "no recovery check")
    why = f"took {took:g} s" if took is not None else f"was not measured ({unmeasured})"
    console.print(
        f"[red]{escape(view.source)}: recovery {escape(why)}; --max-recovery {limit:g}[/]",
        highlight=False,
    )
    return worst_exit([code, EXIT_NOT_RECOVERED])


def _verdict(
    args: argparse.Namespace, score: Score, codes: list[int], floor_code: int, console: Console
) -> int:
    """The most severe code; with --min-score, deviations are judged by the score
    (a failed envelope floor is never excused by it)."""
    if args.min_score is None:
        return worst_exit([*codes, floor_code])
    hard = [c for c in codes if c not in (EXIT_HELD, EXIT_DEVIATED)]
    if floor_code != EXIT_HELD:
        hard.append(floor_code)
    if hard:
        return worst_exit(hard)
    if score.value is None or score.value < args.min_score:
        console.print(f"[red]resilience score below the minimum {args.min_score:g}[/]")
        return EXIT_DEVIATED
    return 0
