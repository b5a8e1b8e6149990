"""``gameday validate``: check experiments without touching anything."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.markup import escape

from chaos_ext.cli._common import (
    add_control_options,
    load_settings_or_none,
    load_valid_experiments,
)
from chaos_ext.errors import InvalidArgument
from chaos_ext.runner.verdict import EXIT_HELD, EXIT_INVALID

HELP = """\
Validate experiments: the Chaos Toolkit schema, that every Python activity
exists, our activities' arguments (types and values such as CIDRs, interface
names, ranges; the same check each activity runs when it is called), PromQL
syntax wherever a query appears (probe arguments, catalog entries, abort plans,
${...} values once substituted where the configuration resolves them), and every
safety control of the experiments and of the Chaos Toolkit settings: that it
imports, that its arguments are valid, that its plan files exist and are valid.
Nothing is injected and no target is contacted.

Every problem of every file is printed, one line each, then the exit code is 3
(0 when every file is valid):

  invalid: x.json: action 'lag' at method[0].provider.arguments: delay_seconds: expected
    float, got 'abc'
  invalid: x.json: probe 'errors' at method[1].provider.arguments: expr: invalid
    PromQL 'sum(rate(x[5m]': unclosed left parenthesis
  invalid: x.json: controls[0]: control 'safeguard': cannot import
    'chaosaddons.controls.safeguards': No module named 'chaosaddons'

(wrapped here to fit; the real lines are never wrapped, also in CI logs).
--settings FILE adds the controls of a Chaos Toolkit settings file (default
~/.chaostoolkit/settings.yaml, as `chaos run` reads it).

--abort-on and --alerts are checked as `gameday run` would read them (rule
files and PrometheusRule manifests parsed, the selection not empty), and the
alerts they select are listed.
"""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "validate", help="validate experiments, touch nothing", description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("experiments", nargs="+", metavar="EXPERIMENT", help="JSON/YAML files")
    add_control_options(parser, allow=False)
    parser.add_argument(
        "--abort-on",
        metavar="FILE",
        action="append",
        default=[],
        help="check stop conditions as `gameday run --abort-on` reads them",
    )
    parser.add_argument("--alerts", metavar="SELECTOR", action="append", default=[],
                        help="alert selectors, as `gameday run --alerts`")  # fmt: skip
    parser.set_defaults(handler=handle)


def _check_abort(args: argparse.Namespace, console: Console) -> bool:
    if not args.alerts and not args.abort_on:
        return True  # nothing to check: the stop-condition machinery is not imported
    from chaos_ext.prometheus.abort import load_sources, parse_selector  # noqa: PLC0415 - lazy

    try:
        selectors = [parse_selector(text) for text in args.alerts]
        if selectors and not args.abort_on:
            raise InvalidArgument("--alerts needs --abort-on")
        if not args.abort_on:
            return True
        plan = load_sources(args.abort_on, selectors)
    except InvalidArgument as exc:
        console.print(f"[red]invalid:[/] --abort-on: {escape(str(exc))}", highlight=False)
        return False
    names = sorted({r.name for r in plan.alerts.rules})
    console.print(
        f"[green]valid:[/] --abort-on {escape(plan.source)}: {len(plan.conditions)} condition(s), "
        f"{len(plan.alerts.rules)} alert rule(s) ({escape(', '.join(names)) or 'none'}), "
        f"firing alerts from {', '.join(w.source for w in plan.alerts.firing) or 'nowhere'}",
        highlight=False,
    )
    return True


def handle(args: argparse.Namespace, console: Console) -> int:
    settings = load_settings_or_none(args, console)
    abort_ok = _check_abort(args, console)
    loaded = load_valid_experiments(args.experiments, console)
    if loaded is None or settings is None or not abort_ok:
        return EXIT_INVALID
    for path, experiment in loaded:
        console.print(f"[green]valid:[/] {path} — {experiment['title']}", highlight=False)
    return EXIT_HELD
