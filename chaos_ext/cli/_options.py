"""The options several commands share, each declared once, meaning the same everywhere.

One function per option adds it to a parser, with the one help text; a
command's ``purpose`` may end a help line (what it does with the value), never
change what the value means. ``--ledger`` is global (``chaos_ext.cli.main``)
and declared there once.

``--abort-on PLAN`` (repeatable) is read by :func:`abort_plan_of` for every
command that has it (run, gate, validate, envelope, schedule): an abort plan
file, a rule file or PrometheusRule manifest, the name of a built-in plan
(``gameday catalog``), ``prometheus-alerts``, or ``alertmanager``;
``--alerts SELECTOR`` picks alerts of the last three. Every command takes
every form; ``schedule``, which ships the plan in its ConfigMap, takes one
file (or built-in plan) and refuses a second at admission (see
``chaos_ext.cli.schedule``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos_ext._core.prometheus_api.promql import validating
from chaos_ext.errors import InvalidArgument
from chaos_ext.prometheus.catalogs import builtin_abort_plans

if TYPE_CHECKING:
    from chaos_ext.controls.stop_conditions import AbortPlan

__all__ = [
    "ALERTMANAGER_URL",
    "abort_form",
    "abort_plan_of",
    "add_abort_options",
    "add_kube_options",
    "add_var_options",
    "alertmanager_url_missing",
    "declared_value",
    "watches_alertmanager",
]

_KEYWORDS = ("prometheus-alerts", "alertmanager")
ALERTMANAGER_URL = "alertmanager_url"

ABORT_ON_HELP = (
    "stop conditions watched while any fault is open (repeatable): an abort plan file, a "
    "rule file or PrometheusRule, a built-in plan name (`gameday catalog`), "
    "prometheus-alerts, or alertmanager (its URL: --var alertmanager_url=... or the "
    "experiment's configuration)"
)
ALERTS_HELP = (
    "which alerts of --abort-on rule files, prometheus-alerts or alertmanager stop the run "
    "(repeatable; any): severity=critical"
)
VAR_HELP = "configuration value (repeatable; later ones win), as in `chaos run --var`"
VAR_FILE_HELP = (
    "JSON/YAML with 'configuration' and 'secrets' keys, or a .env file (repeatable; "
    "later files win)"
)


def _with(text: str, purpose: str | None) -> str:
    return f"{text}; {purpose}" if purpose else text


def add_abort_options(parser: argparse.ArgumentParser) -> None:
    """``--abort-on`` and ``--alerts``, read by :func:`abort_plan_of`."""
    parser.add_argument(
        "--abort-on", metavar="PLAN", action="append", default=[], help=ABORT_ON_HELP
    )
    parser.add_argument(
        "--alerts", metavar="SELECTOR", action="append", default=[], help=ALERTS_HELP
    )


def abort_form(value: str) -> str:
    """Which form of ``--abort-on`` ``value`` is (an existing file wins over a name)."""
    if Path(value).exists():
        return "file"
    if value in _KEYWORDS:
        return value
    if value in builtin_abort_plans():
        return "built-in"
    return "file"  # a missing file: load_plan says so, naming the built-in plans


def abort_plan_of(args: argparse.Namespace) -> AbortPlan | None:
    """The one plan of ``--abort-on`` and ``--alerts`` (None without them).

    Raises InvalidArgument, quoting the value, for a plan that cannot be read, or
    ``--alerts`` without anything to select from.
    """
    values: list[str] = getattr(args, "abort_on", [])
    texts: list[str] = getattr(args, "alerts", [])
    if not values and not texts:
        return None
    from chaos_ext.controls.stop_conditions import (  # noqa: PLC0415 - only with --abort-on
        load_sources,
        parse_selector,
    )

    selectors = [parse_selector(text) for text in texts]
    if selectors and not values:
        raise InvalidArgument(
            "--alerts needs --abort-on RULES.yaml, prometheus-alerts or alertmanager"
        )
    if not values:
        return None
    with validating():  # judged offline: their Prometheus is each experiment's
        return load_sources(values, selectors)


def watches_alertmanager(plan: AbortPlan | None) -> bool:
    """The plan watches alerts firing in Alertmanager (``--abort-on alertmanager``)."""
    return plan is not None and any(w.source == "alertmanager" for w in plan.alerts.firing)


def declared_value(experiment: dict[str, Any], config_vars: dict[str, Any], key: str) -> Any:
    """The value the run's configuration will hold for ``key``: chaoslib keeps only the
    keys the experiment declares, ``--var`` overriding them (an env value read here)."""
    declared = experiment.get("configuration") or {}
    if not isinstance(declared, dict) or key not in declared:
        return None
    value = config_vars.get(key, declared[key])
    if isinstance(value, dict) and value.get("type") == "env":
        return os.environ.get(str(value.get("key")), value.get("default"))
    return value


def alertmanager_url_missing(
    plan: AbortPlan | None,
    experiment: dict[str, Any],
    config_vars: dict[str, Any],
    *,
    here: bool = True,
) -> str | None:
    """Why the watch of ``plan`` has no Alertmanager URL for ``experiment``, or None.

    The URL comes from ``--var alertmanager_url=`` or the experiment's configuration
    (the watch reads --var itself: chaos_ext.controls.stop_conditions). ``here=False``:
    the run happens elsewhere (a CronJob's pod), so a declared key is enough.
    """
    if not watches_alertmanager(plan):
        return None
    declared = experiment.get("configuration") or {}
    if here:
        given = config_vars.get(ALERTMANAGER_URL) or declared_value(
            experiment, config_vars, ALERTMANAGER_URL
        )
    else:
        given = ALERTMANAGER_URL in config_vars or (
            isinstance(declared, dict) and ALERTMANAGER_URL in declared
        )
    if given:
        return None
    return (
        "watching alertmanager (--abort-on alertmanager) needs its URL: "
        f"--var {ALERTMANAGER_URL}=http://alertmanager:9093, or the key in the "
        "experiment's configuration"
    )


def add_var_options(
    parser: argparse.ArgumentParser, *, purpose: str | None = None, files: bool = True
) -> None:
    """``--var`` and ``--var-file``, as ``chaos run`` has them; ``purpose`` ends each
    help line (what this command does with them). ``files=False``: ``--var`` only, for
    a command whose run happens elsewhere (``schedule``: a file here is not there)."""
    parser.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="KEY[:TYPE]=VALUE",
        help=_with(VAR_HELP, purpose),
    )
    if files:
        parser.add_argument(
            "--var-file",
            action="append",
            default=[],
            metavar="FILE",
            help=_with(VAR_FILE_HELP, purpose),
        )


def add_kube_options(
    parser: argparse.ArgumentParser,
    *,
    purpose: str,
    context_default: str = "$KUBERNETES_CONTEXT, else the kubeconfig's current one",
) -> None:
    """``--kubeconfig`` and ``--context``: the cluster this command talks to, for every
    command that talks to one (run, plan, rollback, ledger). They reach the Kubernetes
    clients through the command's Settings (chaos_ext._core.settings); ``purpose`` ends
    each help line (what this command does with the cluster)."""
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help=f"kubeconfig of the cluster (default: $KUBECONFIG, else ~/.kube/config); {purpose}",
    )
    parser.add_argument(
        "--context",
        metavar="NAME",
        help=f"kubeconfig context (default: {context_default}); {purpose}",
    )
