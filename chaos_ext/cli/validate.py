"""``gameday validate``: check experiments without touching anything."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from chaos_ext._core.console import escape
from chaos_ext._runner.verdict import EXIT_HELD, EXIT_INVALID
from chaos_ext.cli._admission import Admitted, admit
from chaos_ext.cli._common import add_control_options
from chaos_ext.cli._options import add_abort_options, add_var_options

if TYPE_CHECKING:
    from rich.console import Console

HELP = """\
Validate experiments: the Chaos Toolkit schema, that every Python activity
exists, our activities' arguments (types and values such as CIDRs, interface
names, ranges; the same check each activity runs when it is called), PromQL
syntax wherever a query appears (probe arguments, catalog entries, abort plans,
${...} values once substituted where the configuration resolves them), and every
safety control of the experiments and of the Chaos Toolkit settings: that it
imports, that its arguments are valid, that its plan files exist and are valid.
Nothing is injected and no target is contacted, except that when a
prometheus_url is given (--var, --var-file, a URL in the experiment, or its
environment variable when set; not an env default) each PromQL query is sent to
that server's /api/v1/format_query, whose verdict is the one for its version.
Offline, nothing a Prometheus release accepts is refused: what is newer than the
target Prometheus (its buildinfo, else --var prometheus_version=2.42, else
unknown) is a warning naming the version that added it and its feature flag;
promtool (when installed) locates syntax errors and checks rule files.

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

validate and run make one decision: a file that validates with the same
--var, --var-file, --settings, --abort-on, --alerts and --settle is one that
`gameday run` accepts, and they print the same refusal lines. The
configuration is resolved as the run resolves it (an environment key that is
not set is refused, as by `chaos validate`); secrets are checked by shape only,
since they are often set only where the run happens (the run resolves them).

Every argument problem of every activity is listed (each bad argument, its own
line); timeouts and pauses must be finite numbers of seconds >= 0. Each --var
name must be declared in an experiment's configuration (or be one gameday reads
itself, such as prometheus_url); else it is refused with a "did you mean".

Files are read within limits: a regular file only (a FIFO or a device is
refused at once), at most 4 MiB, UTF-8, nested at most 64 levels, YAML aliases
expanding to at most 100,000 values. A file of another tool (Chaos Mesh,
LitmusChaos, Krkn, a Chaos Toolkit journal, a Prometheus rule file, several
YAML documents) is named in one line, with what to do. A file whose validation
crashes is one line naming it and the exception; the other files are still
validated. Refs ({"ref": "name"}) are resolved in every phase. Where gameday is
stricter than `chaos validate`, docs/validation.md lists the rule and its reason.
"""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "validate",
        help="validate experiments, touch nothing",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("experiments", nargs="+", metavar="EXPERIMENT", help="JSON/YAML files")
    add_control_options(parser, allow=False)
    add_abort_options(parser)
    add_var_options(parser)
    parser.add_argument(
        "--settle", type=float, metavar="SECONDS", help="check a settle time as `gameday run`"
    )
    parser.set_defaults(handler=handle)


def _say_abort(admitted: Admitted, console: Console) -> None:
    plan = admitted.abort_plan
    if plan is None:
        return
    names = sorted({r.name for r in plan.alerts.rules})
    firing = ", ".join(w.source for w in plan.alerts.firing)
    console.print(
        f"[green]valid:[/] --abort-on {escape(plan.source)}: {len(plan.conditions)} condition(s), "
        f"{len(plan.alerts.rules)} alert rule(s) ({escape(', '.join(names)) or 'none'}), "
        f"firing alerts from {escape(firing) or 'nowhere'}",
        highlight=False,
    )


def handle(args: argparse.Namespace, console: Console) -> int:
    admitted = admit(args, args.experiments, console, secrets=False)
    if admitted is None:
        return EXIT_INVALID
    _say_abort(admitted, console)
    for path, experiment in admitted.experiments:
        console.print(
            f"[green]valid:[/] {escape(str(path))} — {escape(str(experiment['title']))}",
            highlight=False,
        )
    return EXIT_HELD
