"""``gameday run``: run experiments with a rollback guarantee."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from chaos_ext._core.ledger import Ledger, default_ledger, parse_watchdog_grace
from chaos_ext._core.watchdog import DEFAULT_GRACE_S, GRACE_VARIABLE
from chaos_ext._runner import signals
from chaos_ext._runner.control_checks import (
    ControlGuard,
    activate_global_controls,
    control_problems,
)
from chaos_ext._runner.execute import (
    EXIT_FAILED,
    EXIT_INVALID,
    RunOptions,
    RunResult,
    not_run,
    run_experiment,
)
from chaos_ext._runner.run_times import DEFAULT_RECOVER_S
from chaos_ext._runner.sweep import checked, dead_entries, shielded, sweep
from chaos_ext._runner.verdict import worst_exit
from chaos_ext.cli import plan
from chaos_ext.cli._admission import admit
from chaos_ext.cli._common import add_control_options
from chaos_ext.cli._options import add_abort_options, add_kube_options, add_var_options
from chaos_ext.cli._say import say_verdict
from chaos_ext.cli.plan import privilege_refusals
from chaos_ext.controls.stop_conditions import AbortOnBreach, AbortPlan
from chaos_ext.errors import InvalidArgument, LedgerError

HELP = """\
Run Chaos Toolkit experiments (JSON or YAML) through chaostoolkit-lib.

Every experiment is validated first, as by `gameday validate` (each --var name
must be one an experiment declares); if any is invalid nothing runs (exit 3).
--kubeconfig FILE and --context NAME choose the cluster of the Kubernetes
activities (else $KUBECONFIG or ~/.kube/config, and its current context).
Then each fault action's plan is asked whether this process has the privileges
it needs (a way to the cluster, CAP_NET_ADMIN where a network stack changes):
a missing one is refused before anything runs, one line each ("no kubeconfig
found: tried ...", "lacks CAP_NET_ADMIN ..."; "nothing injected"), exit 3.
Before running, the fault ledger is checked (a ledger that cannot be trusted
stops the run, exit 2, listing what may still be injected), then faults left
open by a dead run (owner process gone) are undone and listed (--no-recover
refuses to start instead). During the run, progress is shown live. Rollbacks
always run (completed, deviated, failed, Ctrl-C, SIGTERM), then every fault
this run left in the ledger is undone. After SIGTERM or Ctrl-C the run exits
within 10 s, journal written, whatever pause is pending; the processes an
activity started end with their process group; the first stop decides, and
further signals never cut the rollbacks short nor change the exit (2). A signal
during the ledger sweep lets the undo finish and skips the recovery wait; one
before any experiment started is one line (exit 2, nothing injected, no
journal); SIGUSR1 (chaoslib's exit_gracefully) is "interrupted", not "aborted".

The journal of each experiment is written to --journal (one experiment) or to
JOURNAL_DIR/journal-<experiment file name>.json.

--dry-run is `gameday plan`: each fault's live targets, blast radius and
preflights, the same table, --json FILE and exit codes (0 planned and every
preflight passed, 1 not, 3 invalid input or a privilege missing); nothing is injected, nothing is
recorded in the fault ledger, no journal is written. The experiments are
admitted as a run admits them, so an option the run would refuse (--settle,
--abort-on) is refused here too; the rest of the run's options are not used.

examples:
  gameday run experiments/sandbox/01-db-latency.json
  gameday run --var prometheus_url=http://127.0.0.1:9090 experiments/*.json
  gameday run --var-file prod.yaml --journal out/j.json experiments/dns-saturation.json
  gameday run --abort-on edge experiments/db-latency.json
  gameday run --repeat 5 --journal-dir before/ experiments/db-latency.json
  gameday run --dry-run --json plan.json experiments/node-drain.json   # = gameday plan
  gameday run --abort-on coredns-mixin-alerts.yaml --alerts severity=critical \\
      experiments/dns-saturation.json
  gameday run --abort-on alertmanager --alerts 'severity=critical' \
      --var alertmanager_url=http://alertmanager:9093 experiments/dns-saturation.json

--abort-on PLAN watches stop conditions in Prometheus from the start of the run
for as long as any fault of it is open (settling, the hypothesis before, the
method, the steady state after, the rollbacks and the sweep; repeatable): an abort plan (probes from
`gameday catalog`; a built-in plan is named: `--abort-on edge`), a Prometheus
rule file (`groups:`, e.g. a mixin's alerts) or a PrometheusRule manifest, or
the words `prometheus-alerts` / `alertmanager` for alerts already firing there.
Alerting rules are evaluated by gameday with Prometheus's semantics: an alert
stops the run once its expression has returned series for its whole `for:`
(keep_firing_for honoured). --alerts SELECTOR (repeatable, any of them) picks alerts by name
and labels: `severity=critical`, `alertname=~"CoreDNS.*",severity!=info`,
`KubeAPIDown`. A breach, a firing alert, or Prometheus unreachable too many
checks in a row ends the pause, activity or settle loop in progress at once
(and the processes it started) and rolls back: outcome "aborted". The journal
records which condition or alert fired and when (gameday.abort). Alerts that
can never fire against the Prometheus are named before the run. Formats:
docs/prometheus.md. If Prometheus does not answer when the watch starts, the
run does not start (exit 3).

Safety controls fail closed: a control declared in an experiment or in the
Chaos Toolkit settings (--settings, default ~/.chaostoolkit/settings.yaml) that
cannot be imported, configured or started stops the run before anything is
injected: exit 3 and one line naming the control and the reason.
--allow-missing-controls runs without it instead, and says so loudly. File
arguments of our controls (the abort control's plan) are resolved from the
experiment file's directory.

--settle SECONDS polls the steady-state hypothesis until it holds, for up to
SECONDS, before the first check (also the experiment extension
{"name": "gameday", "settle_seconds": 60}; --settle wins). A fault injected into
a system already out of tolerance proves nothing: if it does not settle in
time, the outcome is "unsteady" and nothing is injected.

--recover SECONDS: after the rollbacks and the ledger sweep, the hypothesis is
polled until it holds again, for up to SECONDS (default 60; the experiment
extension {"name": "gameday", "recover_seconds": 120}; 0 turns it off). The
journal records time_to_recover_s, from the last undo to the first check that
held; a hypothesis that never holds again is "not-recovered" (exit 5).

outcomes and exit codes (the most severe over all experiments: 2 > 5 > 1 > 4 > 0):
  0  held             every hypothesis held before, during and after the faults
  1  deviated         the faults ran and a hypothesis was not met
  2  failed           an action failed, the run was aborted or interrupted, or
     rollback-failed  a rollback did not complete (a fault may still be injected;
                      the summary names it and `gameday rollback` retries)
  3  invalid input    nothing was injected (also "refused": a safety control
     or refused       could not be configured or started, or a privilege a fault
                      needs is missing)
  4  unsteady         the steady state did not hold before the method (or did not
                      settle): nothing was injected, nothing was proven
  5  not-recovered    the faults were undone, but the steady state did not hold
                      again within --recover SECONDS
"""

STOPS_BATCH = ("aborted", "interrupted")
"""Outcomes after which the rest of a batch does not run (each is recorded ``not-run``)."""

_STRATEGIES = (
    "default",
    "before-method-only",
    "after-method-only",
    "during-method-only",
    "continuously",
    "skip",
)


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "run",
        help="run experiments, roll back on every exit path",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("experiments", nargs="+", metavar="EXPERIMENT", help="JSON/YAML files")
    parser.add_argument("--journal", metavar="FILE", help="journal path (one experiment only)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="run nothing: show each fault's targets and preflights, as `gameday plan`",
    )
    parser.add_argument("--json", metavar="FILE", help="with --dry-run: write the plans as JSON")
    add_run_options(parser)
    parser.add_argument(
        "--no-recover",
        action="store_true",
        help="refuse to start if a dead run left faults open (default: undo them first)",
    )
    parser.set_defaults(handler=handle)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``run`` that ``gate`` shares (``run_batch`` reads them)."""
    parser.add_argument(
        "--journal-dir", metavar="DIR", default=".", help="where journals go (default: .)"
    )
    add_var_options(parser)
    parser.add_argument(
        "--hypothesis-strategy",
        choices=_STRATEGIES,
        default="default",
        help="when the steady-state hypothesis is checked (default: before and after)",
    )
    parser.add_argument(
        "--hypothesis-frequency",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="interval for during-method/continuous hypothesis checks",
    )
    parser.add_argument(
        "--fail-fast", action="store_true", help="stop at the first deviation during the method"
    )
    add_abort_options(parser)
    parser.add_argument(
        "--recover",
        type=float,
        metavar="SECONDS",
        help="after the undo, wait up to SECONDS for the hypothesis to hold again; never: "
        "not-recovered, exit 5 (default: the experiment's gameday extension "
        f"recover_seconds, else {DEFAULT_RECOVER_S:g}; 0 turns it off)",
    )
    parser.add_argument(
        "--repeat",
        type=_positive,
        default=1,
        metavar="N",
        help="run each experiment N times (journals JOURNAL_DIR/journal-<name>-<i>.json): "
        "the runs `gameday compare` needs to decide a tuning change (default 1)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        metavar="SECONDS",
        help="wait up to SECONDS for the hypothesis to hold before starting "
        "(default: the experiment's gameday extension settle_seconds, else 0)",
    )
    parser.add_argument(
        "--watchdog-grace",
        type=_grace,
        metavar="SECONDS",
        help="each fault's watchdog undoes it SECONDS after its run is seen dead (kill -9), "
        "never while the run lives (a stopped one too); a fault with a duration ends at its "
        "deadline anyway; 0 turns the dead-run undo off (default: the experiment's gameday "
        f"extension watchdog_grace_seconds, else ${GRACE_VARIABLE}, else {DEFAULT_GRACE_S:g})",
    )
    add_control_options(parser)
    add_kube_options(parser, purpose="the cluster the experiments' Kubernetes activities act on")


def _grace(text: str) -> float:
    try:
        return parse_watchdog_grace(text, "--watchdog-grace")
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of runs >= 1, got {text!r}")
    return value


def recover(ledger: Ledger, console: Console, refuse: bool) -> bool:
    """Undo faults left by dead runs. False when the run must not start.

    A ledger that fails its full check also stops the run: it could not
    prove that nothing is left open.
    """
    if checked(ledger, console) is None:
        console.print("[red]not starting: the fault ledger cannot be trusted[/]")
        return False
    dead = dead_entries(ledger)
    if not dead:
        return True
    if refuse:
        console.print(
            f"[red]{len(dead)} fault(s) left open by a dead run "
            f"(see `gameday ledger`); refusing to start (--no-recover)[/]"
        )
        return False
    console.print(f"[yellow]found {len(dead)} fault(s) left open by a dead run; undoing first[/]")
    with shielded(console):
        outcomes = sweep(dead, ledger, console)
    if any(not o.ok for o in outcomes):
        console.print("[red]could not undo every leftover fault; not starting[/]")
        return False
    return True


def _abort_handlers(
    plan: AbortPlan | None, console: Console, config_vars: dict[str, Any]
) -> tuple[AbortOnBreach, ...]:
    """A fresh abort watch per experiment (none without --abort-on); it sees every --var
    (alertmanager_url, prometheus_url) even when the experiment does not declare it."""
    if plan is None:
        return ()

    def announce(text: str) -> None:
        console.print(f"[bold red]■ {escape(text)}[/]", highlight=False)

    def warn(text: str) -> None:
        console.print(f"[bold yellow]⚠ {escape(text)}[/]", highlight=False)

    return (AbortOnBreach(plan, announce=announce, configuration=config_vars, warn=warn),)


def _control_guard(args: argparse.Namespace, console: Console) -> ControlGuard:
    """Refuses a run whose control failed to configure (first handler: see ControlGuard)."""

    def warn(text: str) -> None:
        console.print(f"[bold yellow]⚠ {escape(text)}[/]", highlight=False)

    return ControlGuard(allow_missing=args.allow_missing_controls, warn=warn)


def unprotected(
    args: argparse.Namespace, experiment: dict[str, Any], settings: dict[str, Any]
) -> tuple[str, ...]:
    """The controls --allow-missing-controls lets this run go without (recorded in its
    journal, shown by the report, the summary and JUnit; ``gate`` fails such a run)."""
    if not getattr(args, "allow_missing_controls", False):
        return ()
    found = [*control_problems(experiment), *control_problems(settings=settings)]
    return tuple(str(problem) for problem in found)


def _journal_path(args: argparse.Namespace, path: Path) -> Path:
    if args.journal:
        return Path(args.journal)
    return Path(args.journal_dir) / f"journal-{path.stem}.json"


def handle(args: argparse.Namespace, console: Console) -> int:
    if args.json and not args.dry_run:
        console.print("[red]--json writes the plans of --dry-run; a run writes journals[/]")
        return EXIT_INVALID
    if args.dry_run:
        return plan.handle(args, console)  # admit() reads the run's options, as a run would
    if args.journal and (len(args.experiments) > 1 or args.repeat > 1):
        console.print(
            "[red]--journal takes one experiment run once; use --journal-dir for "
            "several (or --repeat)[/]"
        )
        return EXIT_INVALID
    results = run_batch(
        args,
        args.experiments,
        console,
        lambda path: _journal_path(args, path),
        refuse_recover=args.no_recover,
    )
    if isinstance(results, int):
        return results
    return worst_exit(r.exit_code for r in results)


def _recovered_ledger(console: Console, *, refuse: bool) -> Ledger | None:
    """The ledger, checked and with dead runs' faults undone; None: do not start."""
    try:
        ledger = default_ledger()
    except LedgerError as exc:
        checked(exc, console)
        console.print("[red]not starting: the fault ledger cannot be trusted[/]")
        return None
    return ledger if recover(ledger, console, refuse=refuse) else None


def run_batch(
    args: argparse.Namespace,
    experiments: list[str],
    console: Console,
    journal_for: Callable[[Path], Path],
    *,
    refuse_recover: bool,
    refuse: Callable[[Path, dict[str, Any]], str | None] | None = None,
) -> list[RunResult] | int:
    """Validate all, read --abort-on, recover dead runs' faults, then run each experiment.

    Shared by ``run`` and ``gate`` (the options of ``add_run_options``). An int
    is the exit code when nothing ran. ``refuse(path, experiment)`` may give a
    line that stops the batch before anything runs (exit 3).
    """
    admitted = admit(
        args, experiments, console, secrets=True
    )  # the very decision of `gameday validate`
    if admitted is None:
        return EXIT_INVALID
    refusals = [line for path, e in admitted.experiments if refuse and (line := refuse(path, e))]
    refusals += privilege_refusals(admitted)  # each action's plan: may this process?
    for line in refusals:
        console.print(f"[red]{escape(line)}[/]", highlight=False)
    if refusals:
        return EXIT_INVALID
    ledger = _recovered_ledger(console, refuse=refuse_recover)
    if signals.interrupted():  # a signal while the ledger was checked: nothing ran yet
        console.print(
            f"[bold yellow]⚠ {signals.stop_cause()} received before any experiment started: "
            "stopped; nothing was injected, no journal was written[/]"
        )
        return EXIT_FAILED
    if ledger is None:
        return EXIT_FAILED
    activate_global_controls(admitted.settings)
    abort_plan = admitted.abort_plan
    config_vars, secret_vars = admitted.config_vars, admitted.secret_vars
    repeat = getattr(args, "repeat", 1)
    plan = [(path, e, i) for path, e in admitted.experiments for i in range(1, repeat + 1)]

    def journal_of(path: Path, i: int) -> Path:
        journal = journal_for(path)
        return journal if repeat == 1 else journal.with_name(f"{journal.stem}-{i}.json")

    results: list[RunResult] = []
    for path, experiment, i in plan:
        options = RunOptions(
            journal_path=journal_of(path, i),
            config_vars=config_vars,
            secret_vars=secret_vars,
            hypothesis_strategy=args.hypothesis_strategy,
            hypothesis_frequency=args.hypothesis_frequency,
            fail_fast=args.fail_fast,
            extra_handlers=(
                _control_guard(args, console),
                *_abort_handlers(abort_plan, console, config_vars),
            ),
            settle_seconds=admitted.settle[path],
            recover_seconds=admitted.recover[path],
            watchdog_grace=admitted.watchdog_grace.get(path),
            unprotected=unprotected(args, experiment, admitted.settings),
        )
        if repeat > 1:
            console.print(f"[bold]run {i} of {repeat}[/]: {escape(str(path))}", highlight=False)
        result = run_experiment(path, experiment, options, ledger, console)
        results.append(result)
        say_verdict(result, console)
        if (
            result.outcome in STOPS_BATCH
            or result.hypothesis_outcome in STOPS_BATCH
            or signals.interrupted()  # a signal during its sweep or recovery
        ):
            # a stop condition or an operator's Ctrl-C stops the whole batch: the rest
            # did not run, and each says so (summary, JUnit error, score)
            reason = f"{path} was {result.hypothesis_outcome} before it"
            for rest, skipped, j in plan[len(results) :]:
                results.append(not_run(rest, skipped, journal_of(rest, j), reason))
                say_verdict(results[-1], console)
            break
    return results
