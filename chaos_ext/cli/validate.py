"""``gameday validate``: check experiments without touching anything."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from chaos_ext.cli._common import (
    add_control_options,
    load_settings_or_none,
    load_valid_experiments,
)
from chaos_ext.runner.execute import EXIT_HELD, EXIT_INVALID

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

  invalid: x.json: action 'lag' at method[0].provider.arguments: delay_ms: expected
    float, got 'abc'
  invalid: x.json: probe 'errors' at method[1].provider.arguments: expr: invalid
    PromQL 'sum(rate(x[5m]': unclosed left parenthesis
  invalid: x.json: controls[0]: control 'safeguard': cannot import
    'chaosaddons.controls.safeguards': No module named 'chaosaddons'

(wrapped here to fit; the real lines are never wrapped, also in CI logs).
--settings FILE adds the controls of a Chaos Toolkit settings file (default
~/.chaostoolkit/settings.yaml, as `chaos run` reads it).
"""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "validate", help="validate experiments, touch nothing", description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("experiments", nargs="+", metavar="EXPERIMENT", help="JSON/YAML files")
    add_control_options(parser, allow=False)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace, console: Console) -> int:
    settings = load_settings_or_none(args, console)
    loaded = load_valid_experiments(args.experiments, console)
    if loaded is None or settings is None:
        return EXIT_INVALID
    for path, experiment in loaded:
        console.print(f"[green]valid:[/] {path} — {experiment['title']}", highlight=False)
    return EXIT_HELD
