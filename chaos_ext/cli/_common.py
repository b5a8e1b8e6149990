"""Plumbing shared by subcommands: loading and validating experiment files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from chaos_ext.runner.experiments import ExperimentInvalid, load_experiment, validate_experiment

__all__ = ["load_valid_experiments"]


def load_valid_experiments(
    paths: list[str],
    console: Console,
    secret_vars: dict[str, Any] | None = None,
    config_vars: dict[str, Any] | None = None,
) -> list[tuple[Path, dict[str, Any]]] | None:
    """Load and validate every file; print one line per problem; None if any is invalid."""
    loaded: list[tuple[Path, dict[str, Any]]] = []
    ok = True
    for name in paths:
        path = Path(name)
        try:
            experiment = load_experiment(path)
            validate_experiment(path, experiment, secret_vars, config_vars)
        except ExperimentInvalid as exc:
            console.print(f"[red]invalid:[/] {escape(str(exc))}", highlight=False)
            ok = False
            continue
        loaded.append((path, experiment))
    return loaded if ok else None
