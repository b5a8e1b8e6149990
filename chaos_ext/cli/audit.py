"""``gameday audit envoy``: check an Envoy's live configuration, for pre-release gates."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chaos_ext._core.console import make_console
from chaos_ext._runner.execute import EXIT_DEVIATED, EXIT_HELD, EXIT_INVALID
from chaos_ext.envoy.audit import (
    DEFAULT_PROFILE,
    FIX_KINDS,
    PROFILES,
    ROLE_CHOICES,
    AuditRun,
    GatewayFacts,
    heap_rule,
    load_facts,
    run_audit,
    summary_line,
    write_fix,
)
from chaos_ext.envoy.errors import EnvoyError
from chaos_ext.errors import InvalidArgument

EXIT_FIX_WRITTEN = 1  # the input fails; the files written, applied, make every check pass
EXIT_FIX_INCOMPLETE = 2  # files written, but applied they still fail, or parts were left out

HELP = """\
Audit configurations against best practices, without changing anything.
"""

ENVOY_HELP = """\
Audit an Envoy configuration against a rule profile, read-only. The input is
a live /config_dump (admin URL or pod), a saved dump, or a bootstrap file
(JSON or YAML, e.g. the envoy.yaml you keep in git); its kind is detected and
shown. Older dump shapes are read too (HCMs in 'config', unnamed listeners,
warming/draining states, v2alpha admin types, camelCase jsonpb output).

profiles (--profile):
  envoy-edge   (default) exactly what Envoy's "Configuring Envoy as an edge
               proxy" page asks for; every rule cites its section
  hardened     envoy-edge plus overload keepalive/timeout actions, load
               shedding, request_headers_timeout, max_connection_duration
  sidecar      a mesh sidecar's inbound listeners and connection cap
An Istio sidecar (node id sidecar~...) is recognised and refused by the edge
profiles; --role overrides what is detected.

One row per rule and target (each listener, each HTTP connection manager,
all clusters, all routes of the audited listeners) with its status: PASS,
FAIL, UNREADABLE (there but not interpretable, or route configurations the
dump lacks: fails the audit), WARN (an unnamed listener that a runtime
connection limit cannot address; a route with its request timeout disabled)
or NOT-IN-INPUT (listeners, clusters or routes a bootstrap leaves to
LDS/CDS/RDS), the value found and its path; a cluster or route row names the
failing ones.

sources:
  http://127.0.0.1:15000                         an Envoy admin address
  pod://istio-system/istio-ingressgateway-7f8c9d6b5-k2x9p
  pod://istio-system?selector=istio=ingressgateway
                                                 exec `pilot-agent request GET config_dump`
                                                 in the istio-proxy container (&container=)
  dump.json, envoy.yaml                          a saved dump or a bootstrap
  -                                              standard input

examples:
  kubectl -n istio-system port-forward deploy/istio-ingressgateway 15000 &
  gameday audit envoy --source http://127.0.0.1:15000
  gameday audit envoy --source pod://istio-system?selector=istio=ingressgateway \\
      --listener 0.0.0.0_8443 --rules team-rules.yaml --profile hardened
  gameday audit envoy --source envoy.yaml                 # gate the bootstrap in git
  kubectl exec deploy/gw -c istio-proxy -- pilot-agent request GET config_dump \\
      | gameday audit envoy --source - --json > audit.json
  gameday audit envoy --source dump.json --fix istio -o fix/   # write the fix

--fix istio -o DIR writes a custom-bootstrap ConfigMap (overload manager,
runtime layer), gateway Deployment patches (the bootstrapOverride annotation,
proxy.istio.io/config runtimeValues for the global connection limit) and an
EnvoyFilter for listener, HTTP connection manager and cluster fields. --fix
envoy -o DIR writes a bootstrap overlay (for --config-yaml) and, for a
bootstrap input, the bootstrap patched in place. Both are applied the way
Envoy/Istio merge them and re-audited before they are written; what still
fails, and why, is printed (on stderr) and in DIR/README.md.

--fix merges with what the gateway already has: its Deployment (the
proxy.istio.io/config annotation, the custom bootstrap, the istio-proxy
memory limit, the pod labels) and its EnvoyFilters, read from --existing
FILE (kubectl get ... -o yaml) or the API (--deployment NAMESPACE/NAME);
conflicts are listed. The heap limit is 80 % of the memory limit
(--memory-limit, else the Deployment's); without one no heap is written.

exit codes: 0 every check passed, 1 a rule failed or a value was unreadable,
3 invalid input (source unreadable or unreachable, neither a dump nor a
bootstrap, unknown listener, bad rules, a sidecar given to an edge profile).
with --fix: 0 nothing to fix (no file written), 1 the files written make
every check pass once applied, 2 files written but incomplete (applied, a
check still fails, or something was left out or conflicts: listed), 3 invalid
input or the fix refused (nothing written).
"""


def register(sub: Any) -> None:
    audit = sub.add_parser(
        "audit",
        help="audit live configuration (Envoy edge settings)",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    targets = audit.add_subparsers(dest="target", metavar="TARGET", required=True)
    envoy = targets.add_parser(
        "envoy",
        help="Envoy /config_dump against edge best practices",
        description=ENVOY_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    envoy.add_argument(
        "--source",
        required=True,
        help="admin URL, pod://NS/NAME, dump or bootstrap file, - (stdin)",
    )
    envoy.add_argument(
        "--profile",
        default=DEFAULT_PROFILE,
        choices=PROFILES,
        help=f"rule profile (default {DEFAULT_PROFILE})",
    )
    envoy.add_argument(
        "--role",
        default="auto",
        choices=ROLE_CHOICES,
        help="the proxy's role (default: detected from the node id)",
    )
    envoy.add_argument("--listener", default="", help="only this listener (default: all HTTP)")
    envoy.add_argument("--rules", default="", metavar="FILE", help="YAML rules merged by id")
    envoy.add_argument("--timeout", type=float, default=30.0, help="seconds (default 30)")
    envoy.add_argument("--json", action="store_true", help="print the JSON report")
    envoy.add_argument(
        "--fix",
        choices=FIX_KINDS,
        default="",
        help="write the fix: istio manifests or an envoy overlay",
    )
    envoy.add_argument(
        "-o", "--output", default="", metavar="DIR", help="directory for --fix (created if missing)"
    )
    envoy.add_argument(
        "--memory-limit",
        default="",
        metavar="QUANTITY",
        help="the istio-proxy container's limits.memory (e.g. 1024Mi): sizes "
        "the heap and adds the heap-below-limit rule",
    )
    envoy.add_argument(
        "--existing",
        action="append",
        default=[],
        metavar="FILE",
        help="the gateway's manifests to merge with (Deployment, custom "
        "bootstrap ConfigMap, EnvoyFilters); repeatable",
    )
    envoy.add_argument(
        "--deployment",
        default="",
        metavar="NAMESPACE/NAME",
        help="read the gateway's Deployment, its custom bootstrap and the "
        "namespace's EnvoyFilters from the Kubernetes API",
    )
    envoy.set_defaults(handler=handle_envoy)


def _show(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return text if len(text) <= 60 else text[:57] + "..."


_STATUS = {
    "pass": "[green]PASS[/]",
    "fail": "[red]FAIL[/]",
    "unreadable": "[red]UNREADABLE[/]",
    "warn": "[yellow]WARN[/]",
    "not-in-input": "[cyan]NOT-IN-INPUT[/]",
}


def report_table(report: dict[str, Any]) -> Table:
    """The audit report as a rich table (one row per check)."""
    what = escape(report["input"]["description"])
    title = (
        f"Envoy audit of {escape(report['source'])}: {what}, "
        f"{report['proxy']['role']}, profile {report['profile']}"
    )
    table = Table(title=title)
    for column in ("result", "severity", "rule", "listener", "expected", "found", "path"):
        table.add_column(column, overflow="fold", no_wrap=column in ("result", "severity"))
    for row in report["results"]:
        found = _show(row["found"])
        if row["note"] and row["status"] != "pass":
            # an absent value's note says "absent: Envoy uses ..." itself
            absent = row["found"] == "absent" and row["note"].startswith("absent")
            found = row["note"] if absent else f"{found} ({row['note']})"
        table.add_row(
            _STATUS[row["status"]],
            row["severity"],
            row["rule"],
            escape(row["listener"] or "-"),
            escape(row["expected"]),
            escape(found),
            escape(row["path"]),
        )
    return table


def _fix(args: argparse.Namespace, run: AuditRun, facts: GatewayFacts, console: Console) -> int:
    if run.report["passed"] and not run.report["summary"]["warnings"]:
        console.print("--fix: every check passed, nothing to fix; no file written")
        return EXIT_HELD
    out = write_fix(run, args.fix, args.output, facts)
    console.print(
        f"--fix {args.fix}: wrote {', '.join(sorted(out.files))} to {args.output}",
        highlight=False,
        markup=False,
    )
    for line in out.lines:
        console.print(f"  {escape(line)}", highlight=False)
    for line in out.caveats:
        console.print(f"  [yellow]{escape(line)}[/]", highlight=False)
    for line in out.warnings:
        console.print(f"  [yellow]changes behaviour:[/] {escape(line)}", highlight=False)
    for line in out.review:
        console.print(f"  [yellow]review by hand:[/] {escape(line)}", highlight=False)
    return EXIT_FIX_WRITTEN if out.complete else EXIT_FIX_INCOMPLETE


def _facts(args: argparse.Namespace) -> tuple[GatewayFacts, list[Any]]:
    facts = load_facts(
        existing=args.existing, deployment=args.deployment, memory_limit=args.memory_limit
    )
    if facts.memory_limit_bytes is None:
        return facts, []
    return facts, [heap_rule(facts.memory_limit_bytes, facts.memory_limit_from)]


def handle_envoy(args: argparse.Namespace, console: Console) -> int:
    if args.fix and not args.output:
        console.print("[red]invalid:[/] --fix needs -o DIR (where to write the files)")
        return EXIT_INVALID
    fixed: int | None = None
    try:
        facts, extra = _facts(args)
        run = run_audit(
            args.source,
            listener=args.listener,
            rules_file=args.rules,
            timeout_seconds=args.timeout,
            profile=args.profile,
            role=args.role,
            extra_rules=extra,
        )
        if args.fix:
            fixed = _fix(args, run, facts, console)
    except (InvalidArgument, EnvoyError) as exc:
        console.print(f"[red]invalid:[/] {escape(str(exc))}", highlight=False)
        return EXIT_INVALID
    report = run.report
    if args.json:
        print(json.dumps(report, indent=2))  # noqa: T201 - stdout is the output
    else:
        out = make_console(no_color=args.no_color)
        out.print(report_table(report))
        for note in report["input"]["notes"]:
            out.print(f"note: {escape(note)}", highlight=False)
        colour = "green" if report["passed"] else "red"
        out.print(f"[{colour}]{escape(summary_line(report))}[/]", highlight=False)
    if fixed is not None:
        return fixed
    return EXIT_HELD if report["passed"] else EXIT_DEVIATED
