"""``gameday audit envoy``: check an Envoy's live configuration, for pre-release gates."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chaos_ext._console import make_console
from chaos_ext.envoy.probes import edge_config_audit
from chaos_ext.errors import EnvoyError, InvalidArgument
from chaos_ext.runner.execute import EXIT_DEVIATED, EXIT_HELD, EXIT_INVALID

HELP = """\
Audit configurations against best practices, without changing anything.
"""

ENVOY_HELP = """\
Audit an Envoy's live /config_dump against Envoy's edge best practices: the
overload manager (fixed_heap monitor, shrink_heap / disable_http_keepalive /
stop_accepting_requests thresholds, reduce_timeouts, tcp_listener_accept load
shedding), global and per-listener connection limits (runtime layer), buffer
limits, HTTP/2 stream and window sizes, header/idle/request timeouts, and path
normalisation. One row per rule and target (each listener, each HTTP
connection manager) with the value found and where it is in the dump.

sources:
  http://127.0.0.1:15000                         an Envoy admin address
  pod://istio-system/istio-ingressgateway-7f8c9d6b5-k2x9p
  pod://istio-system?selector=istio=ingressgateway
                                                 exec `pilot-agent request GET config_dump`
                                                 in the istio-proxy container (&container=)
  dump.json                                      a saved /config_dump

examples:
  kubectl -n istio-system port-forward deploy/istio-ingressgateway 15000 &
  gameday audit envoy --source http://127.0.0.1:15000
  gameday audit envoy --source pod://istio-system?selector=istio=ingressgateway \\
      --listener 0.0.0.0_8443 --rules team-rules.yaml
  gameday audit envoy --source dump.json --json > audit.json

exit codes: 0 every check passed, 1 a rule failed, 3 invalid input (source
unreadable or unreachable, not a config_dump, unknown listener, bad rules).
"""


def register(sub: Any) -> None:
    audit = sub.add_parser(
        "audit", help="audit live configuration (Envoy edge settings)", description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    targets = audit.add_subparsers(dest="target", metavar="TARGET", required=True)
    envoy = targets.add_parser(
        "envoy", help="Envoy /config_dump against edge best practices", description=ENVOY_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    envoy.add_argument("--source", required=True, help="admin URL, pod://NS/NAME, or dump file")
    envoy.add_argument("--listener", default="", help="only this listener (default: all HTTP)")
    envoy.add_argument("--rules", default="", metavar="FILE", help="YAML rules merged by id")
    envoy.add_argument("--timeout", type=float, default=30.0, help="seconds (default 30)")
    envoy.add_argument("--json", action="store_true", help="print the JSON report")
    envoy.set_defaults(handler=handle_envoy)


def _show(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return text if len(text) <= 60 else text[:57] + "..."


def report_table(report: dict[str, Any]) -> Table:
    """The audit report as a rich table (one row per check)."""
    table = Table(title=f"Envoy edge audit of {escape(report['source'])}")
    for column in ("result", "severity", "rule", "listener", "expected", "found", "path"):
        table.add_column(column, overflow="fold", no_wrap=column in ("result", "severity"))
    for row in report["results"]:
        verdict = "[green]PASS[/]" if row["pass"] else "[red]FAIL[/]"
        table.add_row(
            verdict, row["severity"], row["rule"], escape(row["listener"] or "-"),
            escape(row["expected"]), escape(_show(row["found"])), escape(row["path"]),
        )  # fmt: skip
    return table


def handle_envoy(args: argparse.Namespace, console: Console) -> int:
    try:
        report = edge_config_audit(
            source=args.source, listener=args.listener, rules_file=args.rules, timeout=args.timeout
        )
    except (InvalidArgument, EnvoyError) as exc:
        console.print(f"[red]invalid:[/] {escape(str(exc))}", highlight=False)
        return EXIT_INVALID
    if args.json:
        print(json.dumps(report, indent=2))  # noqa: T201 - stdout is the output
    else:
        out = make_console(no_color=args.no_color)
        out.print(report_table(report))
        summary = report["summary"]
        colour = "green" if report["passed"] else "red"
        out.print(
            f"[{colour}]{summary['checks']} checks of {summary['rules']} rules on "
            f"{', '.join(report['listeners'])}: {summary['passed']} passed, "
            f"{summary['failed']} failed[/]",
            highlight=False,
        )
    return EXIT_HELD if report["passed"] else EXIT_DEVIATED
