"""Plumbing shared by subcommands: loading and validating experiment files."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos_ext._core.console import escape
from chaos_ext._runner.control_checks import ControlProblem, control_problems, load_run_settings
from chaos_ext._runner.experiments import ExperimentInvalid, Resolve, file_problems

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "add_control_options",
    "load_settings_or_none",
    "load_valid_experiments",
]

ALLOW_HELP = (
    "run even when a declared safety control cannot be imported, configured or "
    "started (default: refuse, exit 3); the run is then NOT protected by it"
)


def add_control_options(parser: argparse.ArgumentParser, *, allow: bool = True) -> None:
    """``--settings`` (and ``--allow-missing-controls`` for commands that run)."""
    parser.add_argument(
        "--settings",
        metavar="FILE",
        help="Chaos Toolkit settings whose controls apply to every experiment "
        "(default: ~/.chaostoolkit/settings.yaml, as `chaos run`)",
    )
    if allow:
        parser.add_argument("--allow-missing-controls", action="store_true", help=ALLOW_HELP)


def _say_unprotected(console: Console, where: str, problem: str) -> None:
    console.print(
        f"[bold yellow]⚠ --allow-missing-controls: {escape(where)}: {escape(problem)}: "
        "this run is NOT protected by it[/]",
        highlight=False,
    )


def load_settings_or_none(
    args: argparse.Namespace, console: Console
) -> tuple[dict[str, Any], Path | None] | None:
    """The settings and their file; None (after one line per problem) when a control of
    the settings would not protect the run, unless --allow-missing-controls."""
    try:
        settings, path = load_run_settings(getattr(args, "settings", None))
    except (OSError, ValueError) as exc:
        console.print(f"[red]invalid: --settings: {escape(str(exc))}[/]", highlight=False)
        return None
    allow = getattr(args, "allow_missing_controls", False)
    problems: list[ControlProblem] = control_problems(settings=settings)
    for problem in problems:
        if allow:
            _say_unprotected(
                console, f"{path}: {problem.where}", f"control {problem.name!r}: {problem.reason}"
            )
        else:
            console.print(f"[red]invalid:[/] {escape(f'{path}: {problem}')}", highlight=False)
    return None if problems and not allow else (settings, path)


def load_valid_experiments(
    paths: list[str],
    console: Console,
    secret_vars: dict[str, Any] | None = None,
    config_vars: dict[str, Any] | None = None,
    *,
    allow_missing_controls: bool = False,
    resolve: Resolve = "all",
    also: Callable[[Path, dict[str, Any]], list[ExperimentInvalid]] | None = None,
) -> list[tuple[Path, dict[str, Any]]] | None:
    """Load and validate every file; print every problem, one line each; None if any.

    Our controls' file arguments are resolved from each experiment's directory.
    With ``allow_missing_controls`` a control problem is a loud warning, not a refusal.
    A file whose validation crashes is one line naming it; the next files are still
    validated. ``resolve``: what is resolved from the environment (runner.experiments.Resolve).
    ``also`` adds the problems a command finds in an experiment that loaded.
    """
    loaded: list[tuple[Path, dict[str, Any]]] = []
    ok = True
    for name in paths:
        path = Path(name)
        experiment, problems = file_problems(path, secret_vars, config_vars, resolve=resolve)
        if experiment is not None and also is not None:
            problems += also(path, experiment)
        refusals = [p for p in problems if not (p.control and allow_missing_controls)]
        for problem in problems:
            if problem in refusals:
                console.print(f"[red]invalid:[/] {escape(str(problem))}", highlight=False)
            else:
                _say_unprotected(console, f"{problem.path}: {problem.where}", problem.message)
        if refusals or experiment is None:
            ok = False
            continue
        loaded.append((path, experiment))
    return loaded if ok else None
