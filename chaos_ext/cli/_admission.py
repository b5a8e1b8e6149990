"""The one decision ``gameday validate`` and ``gameday run`` share: may these files run?

:func:`admit` reads ``--var`` / ``--var-file``, the Chaos Toolkit settings, every
experiment file, ``--abort-on`` / ``--alerts`` and the settle time, checks each
``--var`` name against the experiments' configuration (:func:`unknown_var_lines`),
prints every refusal (one ``invalid:`` line each) and returns what the run needs,
or None.
``validate`` stops there; ``run`` goes on. So a file that validates is a file the
run accepts, and the refusal lines of both are the same.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaoslib import convert_vars, merge_vars

from chaos_ext._core.console import escape
from chaos_ext._runner.experiments import ExperimentInvalid
from chaos_ext._runner.run_times import recover_seconds_of, settle_seconds_of, watchdog_grace_of
from chaos_ext.cli._common import load_settings_or_none, load_valid_experiments
from chaos_ext.cli._options import ALERTMANAGER_URL, abort_plan_of, alertmanager_url_missing
from chaos_ext.errors import InvalidArgument

if TYPE_CHECKING:
    from rich.console import Console

    # the stop conditions are imported only when --abort-on or --alerts is given
    from chaos_ext.controls.stop_conditions import AbortPlan

__all__ = [
    "GAMEDAY_READS",
    "Admitted",
    "admit",
    "unknown_var_lines",
    "var_format_lines",
    "var_names",
]

GAMEDAY_READS = frozenset(
    {
        # the stop conditions' Prometheus client (_core.prometheus_api.client.settings_from)
        # and validation's PromQL judge read these from --var, declared or not
        "prometheus_url",
        "prometheus_base_url",
        "prometheus_verify_tls",
        "prometheus_ca_file",
        "prometheus_timeout_seconds",
        "prometheus_retries",
        # the PromQL version check's target when no server answers (promql_versions)
        "prometheus_version",
        # the alert watch (_core.prometheus_api.alertsources) and the fault windows pushed
        # to a Pushgateway (_runner.windows)
        ALERTMANAGER_URL,
        "pushgateway_url",
    }
)
"""The ``--var`` names gameday itself reads, whatever the experiment declares
(``tests/test_var_names.py`` checks each reader against this set)."""


@dataclass(frozen=True)
class Admitted:
    """Experiments that may run, with what their run needs."""

    experiments: list[tuple[Path, dict[str, Any]]]
    settings: dict[str, Any]
    settings_path: Path | None
    abort_plan: AbortPlan | None
    settle: dict[Path, float]
    recover: dict[Path, float]
    config_vars: dict[str, Any]
    secret_vars: dict[str, Any] = field(repr=False)
    watchdog_grace: dict[Path, float | None] = field(default_factory=dict)


def var_names(texts: list[str]) -> list[str]:
    """The names of ``--var NAME[:TYPE]=VALUE`` options, as chaoslib's convert_vars reads them."""
    names = []
    for text in texts:
        name = text.split("=", 1)[0]
        names.append(name.rsplit(":", 1)[0] if ":" in name else name)
    return names


def var_format_lines(texts: list[str]) -> list[str]:
    """One line per ``--var`` that is not ``NAME[:TYPE]=VALUE``."""
    return [
        f"--var {text!r}: expected NAME=VALUE (or NAME:TYPE=VALUE, TYPE one of str, int, "
        f"float, bytes), e.g. --var {text or 'prometheus_url'}=http://prometheus:9090"
        for text in texts
        if "=" not in text or not text.split("=", 1)[0]
    ]


def unknown_var_lines(texts: list[str], experiments: list[dict[str, Any]]) -> list[str]:
    """One line per ``--var`` name that no experiment declares in its configuration and that
    gameday does not read itself: chaoslib ignores such a value, so a typo would run the
    experiment with its default (``--var prometheus_ulr=...``)."""
    declared = {
        key
        for experiment in experiments
        if isinstance(experiment.get("configuration"), dict)
        for key in experiment["configuration"]
    }
    known = declared | GAMEDAY_READS
    lines = []
    for name in dict.fromkeys(var_names(texts)):
        if name in known:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        lines.append(
            f"--var {name}: no experiment given declares it in its configuration, and "
            f"gameday does not read it, so it would change nothing (declared: "
            f"{', '.join(sorted(declared)) or 'none'}; read by gameday: "
            f"{', '.join(sorted(GAMEDAY_READS))}){hint}"
        )
    return lines


def _refuse(console: Console, text: str) -> None:
    console.print(f"[red]invalid:[/] {escape(text)}", highlight=False)


def _run_problems(
    args: argparse.Namespace, plan: AbortPlan | None, config_vars: dict[str, Any]
) -> Callable[[Path, dict[str, Any]], list[ExperimentInvalid]]:
    """What only the run's options make a problem of an experiment: its settle and recover
    times, and the Alertmanager URL --var or its configuration must give when alerts are
    watched (the watch reads --var itself: chaos_ext.controls.stop_conditions)."""

    def problems(path: Path, experiment: dict[str, Any]) -> list[ExperimentInvalid]:
        found = []
        try:
            settle_seconds_of(experiment, getattr(args, "settle", None))
        except InvalidArgument as exc:
            found.append(ExperimentInvalid(path, "settle", str(exc)))
        try:
            recover_seconds_of(experiment, getattr(args, "recover", None))
        except InvalidArgument as exc:
            found.append(ExperimentInvalid(path, "recover", str(exc)))
        try:
            watchdog_grace_of(experiment, getattr(args, "watchdog_grace", None))
        except InvalidArgument as exc:
            found.append(ExperimentInvalid(path, "watchdog_grace_seconds", str(exc)))
        missing = alertmanager_url_missing(plan, experiment, config_vars)
        if missing:
            found.append(ExperimentInvalid(path, f"configuration.{ALERTMANAGER_URL}", missing))
        return found

    return problems


def admit(
    args: argparse.Namespace, paths: list[str], console: Console, *, secrets: bool
) -> Admitted | None:
    """Every check before anything runs, every refusal printed; None if any.

    ``secrets``: resolve the secrets too (``run``); ``validate`` checks their shape.
    """
    malformed = var_format_lines(args.var)
    for line in malformed:
        _refuse(console, line)
    if malformed:
        return None
    try:
        config_vars, secret_vars = merge_vars(convert_vars(args.var), args.var_file)
    except ValueError as exc:
        _refuse(console, f"--var: {exc}")
        return None
    settings = load_settings_or_none(args, console)
    try:
        plan, plan_ok = abort_plan_of(args), True
    except InvalidArgument as exc:
        plan, plan_ok = None, False
        _refuse(console, f"--abort-on: {exc}")
    loaded = load_valid_experiments(
        paths,
        console,
        secret_vars,
        config_vars,
        allow_missing_controls=getattr(args, "allow_missing_controls", False),
        also=_run_problems(args, plan, config_vars),
        resolve="all" if secrets else "configuration",
    )
    # judged against the experiments that loaded: with one invalid, it would be every name
    unknown = unknown_var_lines(args.var, [e for _, e in loaded]) if loaded is not None else []
    for line in unknown:
        _refuse(console, line)
    if loaded is None or settings is None or not plan_ok or unknown:
        return None
    settle = {path: settle_seconds_of(e, getattr(args, "settle", None)) for path, e in loaded}
    recover = {path: recover_seconds_of(e, getattr(args, "recover", None)) for path, e in loaded}
    return Admitted(
        experiments=loaded,
        settings=settings[0],
        settings_path=settings[1],
        abort_plan=plan,
        settle=settle,
        recover=recover,
        config_vars=config_vars,
        secret_vars=secret_vars,
        watchdog_grace={
            path: watchdog_grace_of(e, getattr(args, "watchdog_grace", None)) for path, e in loaded
        },
    )
