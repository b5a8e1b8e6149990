"""The ``gameday`` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from chaos_ext import __version__
from chaos_ext._core.settings import Settings, use_settings
from chaos_ext._runner.verdict import EXIT_INVALID
from chaos_ext.cli import COMMANDS, command_module

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["build_parser", "main", "settings_of"]

DESCRIPTION = """\
gameday runs Chaos Toolkit experiments against your platform and guarantees
that every fault it injects is rolled back: the experiment's own rollbacks run
on every exit path (completed, deviated, failed, Ctrl-C, SIGTERM), then the
fault ledger is swept. A run killed outright (SIGKILL) is recovered by
`gameday rollback` or by the next `gameday run`.

a 5-minute tour:
  gameday validate experiments/*.json     check experiments, touch nothing
  gameday run experiments/ledger-clean.json   run one, live progress, journal written
  gameday envelope EXPERIMENT --vary ACTIVITY.ARG=LOW..HIGH   where it breaks
  gameday ledger                          faults currently injected
  gameday rollback                        undo every open fault
"""

EPILOG = """\
exit codes (run, gate; the most severe over all experiments: 2 > 5 > 1 > 4 > 0):
  0  held: every hypothesis held and every rollback completed
  1  deviated: the faults ran and a hypothesis was not met
  2  failed (an activity failed: raised, timed out, exited non-zero, HTTP >= 400),
     aborted (a stop condition), interrupted (a signal), not-run (an earlier
     experiment was stopped), or rollback-failed: a rollback did not complete
     and a fault may still be injected (`gameday rollback` retries)
  3  invalid input (experiment file, argument, option, control), or refused: a
     safety control could not be imported, configured or started, or a privilege
     a fault needs is missing (no kubeconfig, no CAP_NET_ADMIN); nothing injected
  4  unsteady: the steady state did not hold before the method (or did not
     settle, --settle); nothing was injected, nothing was proven
  5  not-recovered: the faults were undone, but the steady state did not hold
     again within --recover SECONDS (default 60)
envelope: 0 an answer (a boundary, breaks at LOW, holds to HIGH), 1 noisy
  (runs disagree), 2 incomplete, 3 invalid input, 4 never steady
advise: 0 no risk found, 1 risks found, 2 a source given could not be read,
  3 invalid input (no kubeconfig, a bad option or journal)

environment:
  GAMEDAY_LEDGER           path of the fault ledger (SQLite); default
                           $XDG_STATE_HOME/gameday/ledger.sqlite3 (its event log
                           is <ledger>.events.jsonl beside it)
  GAMEDAY_LEDGER_MARKERS   where ledger markers live (keep it off the ledger's
                           storage); default $XDG_STATE_HOME/gameday/markers
  NO_COLOR                 any non-empty value turns colours off (as --no-color)

output: in a terminal, long lines wrap and tables fit its width; in a pipe,
a file or a CI log, each message stays on one line and tables keep the width
they need.
"""


_GLOBAL_WITH_VALUE = "--ledger"
_LINES_ONLY = frozenset({"validate"})
"""Commands that print only lines of markup: off a terminal, no rich (_core.console)."""


def chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (the first word that is not a global option)."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--":
            return None
        elif word.startswith("--") and "=" not in word and _GLOBAL_WITH_VALUE.startswith(word):
            skip = True  # --ledger PATH (or an abbreviation of it): PATH is not a command
        elif not word.startswith("-"):
            return word
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``gameday`` parser. Only the module of the command chosen in ``argv`` is
    imported and registers its options; the others are listed by name and help line
    (``argv=None``: every module registers, as for a full parser)."""
    chosen = chosen_command(argv) if argv is not None else None
    modules = {c.module for c in COMMANDS if argv is None or c.name == chosen}
    parser = argparse.ArgumentParser(
        prog="gameday",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gameday {__version__}")
    parser.add_argument(
        "--ledger", metavar="PATH", help="fault ledger file (this command; else $GAMEDAY_LEDGER)"
    )
    parser.add_argument(
        "--debug", action="store_true", help="show tracebacks and debug logs on errors"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="show chaoslib's info logs")
    parser.add_argument(
        "--no-color", action="store_true", help="no colours or styles (also: NO_COLOR=1)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        if command.name in sub.choices:
            continue  # registered with its module's first command (ledger: rollback)
        if command.module in modules:
            command_module(command).register(sub)
        else:
            stub = sub.add_parser(command.name, help=command.help, add_help=False)
            stub.add_argument("words", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


class _QuietForcedRollbacks(logging.Filter):
    """gameday always plays rollbacks; chaoslib's warning about it is noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Rollbacks were explicitly requested" not in record.getMessage()


def _configure_logging(debug: bool, verbose: bool, console: Console) -> None:
    level = logging.DEBUG if debug else logging.INFO if verbose else logging.WARNING
    handler: logging.Handler
    if console.is_terminal:
        from rich.logging import RichHandler  # noqa: PLC0415 - not needed by --help

        handler = RichHandler(console=console, show_path=False, rich_tracebacks=debug)
    else:  # CI logs: one record, one line, no columns padded to a width
        handler = logging.StreamHandler(console.file)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_QuietForcedRollbacks())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("chaostoolkit").setLevel(level)
    # its "Retrying (Retry(total=...))" warnings: the error that follows says it once
    logging.getLogger("urllib3").setLevel(logging.DEBUG if debug else logging.ERROR)
    _route_logzero()


def _route_logzero() -> None:
    """logzero's logger (chaostoolkit-prometheus logs through it) obeys ``-v``/``--debug``.

    logzero gives its logger its own stderr handler at DEBUG, so every query a
    chaostoolkit-prometheus probe makes would be printed whatever the level. As
    ``chaos run`` does (``chaoslib.log.override_logzero_module``), a logzero not yet
    imported becomes a module whose ``logger`` is chaostoolkit's; one already imported
    loses its handler and passes its records to ours."""
    if "logzero" not in sys.modules:
        stand_in = types.ModuleType("logzero")
        stand_in.__path__ = []
        setattr(stand_in, "logger", logging.getLogger("chaostoolkit"))  # noqa: B010
        sys.modules["logzero"] = stand_in
        return
    logger = getattr(sys.modules["logzero"], "logger", None)
    if isinstance(logger, logging.Logger) and logger.name != "chaostoolkit":
        logger.handlers.clear()
        logger.setLevel(logging.NOTSET)
        logger.propagate = True


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    args = build_parser(argv).parse_args(argv)
    if not hasattr(args, "handler"):  # the command was not where chosen_command looked
        args = build_parser().parse_args(argv)
    return args


def settings_of(args: argparse.Namespace) -> Settings:
    """What the command passes down to the code it runs (:mod:`chaos_ext._core.settings`):
    its ``--ledger``, ``--kubeconfig``, ``--context`` and ``--db-dsn``; an option not given
    stays None, and the code reading it falls back to the environment."""
    kubeconfig = getattr(args, "kubeconfig", None)
    return Settings(
        ledger=Path(args.ledger) if args.ledger else None,
        kubeconfig=os.path.expanduser(kubeconfig) if kubeconfig else None,
        context=getattr(args, "context", None) or None,
        db_dsn=getattr(args, "db_dsn", None) or None,
    )


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _parse(words)
    except SystemExit as exc:  # argparse: 2 for usage errors; ours is 3
        code = exc.code if isinstance(exc.code, int) else 0
        return EXIT_INVALID if code == 2 else code
    from chaos_ext._core.console import (  # noqa: PLC0415 - rich: not needed by --help
        line_console,
        make_console,
    )

    console_for = line_console if args.command in _LINES_ONLY else make_console
    console = console_for(stderr=True, no_color=args.no_color)
    _configure_logging(args.debug, args.verbose, console)
    try:
        with use_settings(settings_of(args)):
            result: int = args.handler(args, console)
    except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence: one line, exit 2
        if args.debug:
            console.print_exception()
        else:
            from rich.markup import escape  # noqa: PLC0415 - rich: not needed by --help

            console.print(
                f"[red]gameday {args.command}: {type(exc).__name__}: {escape(str(exc))}[/]",
                highlight=False,
            )
        return 2
    return result


if __name__ == "__main__":  # `python -m chaos_ext.cli.main`: as `gameday` (stops handled)
    from chaos_ext.cli.entry import main as gameday

    sys.exit(gameday())
