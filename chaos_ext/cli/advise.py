"""``gameday advise``: what to fix. Findings of runs (``--journal``), and the seed
incidents' risks in a cluster, read-only, before any fault."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chaos_ext._core.k8s import api_client
from chaos_ext._products.advise.gather import AdviceRequest, gather_advice
from chaos_ext._products.advise.risks import Advice
from chaos_ext._products.advise.rules import PoolSource
from chaos_ext._products.findings import Finding
from chaos_ext._runner.verdict import EXIT_FAILED, EXIT_HELD, EXIT_INVALID
from chaos_ext.cli._advise_journal import (
    add_journal_options,
    findings_of_paths,
    handle_journals,
    show_findings,
)
from chaos_ext.cli._journals import expand_journal_paths
from chaos_ext.cli._options import add_kube_options
from chaos_ext.db.leftovers import scan_dsn
from chaos_ext.errors import (
    ChaosExtError,
    FindingRulesError,
    InvalidArgument,
    JournalError,
    KubernetesError,
)

__all__ = ["EXIT_RISKS", "exit_code", "handle", "register"]

EXIT_RISKS = 1
"""At least one risk was found (every source given was read)."""

HELP = """\
What to fix (docs/advice.md), read-only, in two halves:

after a run: --journal J [J ...] gives, for each journal whose hypothesis
deviated, the cause its evidence supports (the fault that was on, the error
class that began first, the metric that moved), one fix with the setting to
change and the experiment that proves it, or "cause unknown" and what to
measure next: the report's findings. The rules are data: probes/findings/*.yaml
and your own files in $GAMEDAY_FINDINGS (paths joined by ':').

before any fault: the risks the seed incidents had, read from the cluster,
each with the objects that show it and the experiment that tests it.
Kubernetes GET and LIST calls only, one SELECT of the database's settings in a
read-only session, Prometheus queries. Only --journal: findings only; with a
cluster option as well (--kubeconfig, --context, --namespace, --db-dsn,
--prometheus-url, --pool-env/--pool-annotation, --node-label, --envoy), both,
and the journals' measured DB ceiling counts for pool-over-ceiling.

  ndots-5            pods whose resolv.conf has ndots:5 (dnsPolicy ClusterFirst,
                     no dnsConfig ndots option); with --prometheus-url, the names
                     CoreDNS answered most (coredns_dns_requests_total by name,
                     else by zone and type; said when the metric is absent)
  dns-no-cache       kube-dns with its dnsmasq container and no node-local-dns
                     DaemonSet (NodeLocal DNSCache)
  pool-over-ceiling  Deployments whose replicas (or HPA maxReplicas) x pool size
                     (--pool-env / --pool-annotation) exceed the database's ceiling:
                     max_connections - superuser_reserved_connections -
                     reserved_connections (--db-dsn), and the ceiling measured by
                     exhaust_connections in a --journal; the lowest counts
  single-replica     Deployments/StatefulSets with one replica on the node pool
  no-pdb             ... with no PodDisruptionBudget selecting their pods
                     (--node-label KEY[=VALUE] picks the pool; default every node)
  sidecar-drift      pods whose sidecar differs from the injector's template
                     (--injector NAMESPACE/NAME; not checked when it is absent)
  envoy-audit        the Envoy edge audit's failing checks (--envoy SOURCE: an
                     admin URL, pod://, or a saved config_dump)

--namespace (repeatable) narrows the workloads; default every namespace.
--json prints {"risks": [...], "notes": [...], "problems": [...], "findings": [...]}
on stdout (findings only: the list of findings).

exit code: 0 no risk found and every source given was read; 1 risks found;
2 a source given could not be read (the others are still listed); 3 invalid
input (no kubeconfig, a bad option or journal).

examples:
  gameday advise --journal reports/gameday-*-fragile/run
  gameday advise --namespace shop --db-dsn postgresql://app@db:5432/shop \\
      --pool-env DB_POOL_SIZE --prometheus-url http://prometheus:9090
"""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "advise",
        help="what to fix: findings of runs, and a cluster's incident risks",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_kube_options(parser, purpose="the cluster read for risks (GET and LIST only)")
    parser.add_argument(
        "-n",
        "--namespace",
        action="append",
        default=[],
        metavar="NAME",
        help="a namespace whose workloads are read (repeatable; default: every namespace)",
    )
    parser.add_argument(
        "--db-dsn",
        metavar="DSN",
        help="PostgreSQL server whose connection ceiling is read (else $GAMEDAY_SCAN_DSN; "
        "the password from PGPASSWORD is better than in the DSN)",
    )
    add_journal_options(parser)  # --journal J [J ...] and --json
    parser.add_argument("--pool-env", metavar="VAR", help="env var holding the pool size")
    parser.add_argument("--pool-annotation", metavar="KEY", help="annotation with the pool size")
    parser.add_argument("--prometheus-url", metavar="URL", help="Prometheus with CoreDNS metrics")
    parser.add_argument("--node-label", default="", metavar="KEY[=VALUE]", help="the node pool")
    parser.add_argument(
        "--injector",
        default="istio-system/istio-sidecar-injector",
        metavar="NAMESPACE/NAME",
        help="the sidecar injector's ConfigMap (default: %(default)s)",
    )
    parser.add_argument("--envoy", metavar="SOURCE", help="Envoy admin URL or config_dump")
    parser.set_defaults(handler=handle)


def request_of(args: argparse.Namespace) -> AdviceRequest:
    """The request the options make; InvalidArgument quoting a bad one."""
    namespace, _, name = str(args.injector).partition("/")
    if not namespace or not name:
        raise InvalidArgument(f"--injector {args.injector!r}: give NAMESPACE/NAME")
    url = args.prometheus_url
    if url and not url.startswith(("http://", "https://")):
        raise InvalidArgument(f"--prometheus-url {url!r}: give an http(s) URL")
    journals = expand_journal_paths(list(args.journal))
    if args.journal and not journals:
        raise InvalidArgument(f"--journal {' '.join(args.journal)}: no journal found")
    return AdviceRequest(
        namespaces=tuple(args.namespace),
        pool=PoolSource(env=args.pool_env, annotation=args.pool_annotation),
        db_dsn=scan_dsn(),
        journals=tuple(Path(j) for j in journals),
        prometheus_url=url,
        node_label=args.node_label,
        injector=(namespace, name),
        envoy=args.envoy,
    )


def exit_code(advice: Advice) -> int:
    """2 a source could not be read; 1 risks found; 0 neither."""
    if advice.problems:
        return EXIT_FAILED
    return EXIT_RISKS if advice.risks else EXIT_HELD


def _table(advice: Advice) -> Table:
    table = Table(title="gameday advise: risks", show_lines=True, title_justify="left")
    for column in ("risk", "objects", "evidence", "experiment"):
        table.add_column(column, overflow="fold")
    for risk in advice.risks:
        table.add_row(
            escape(risk.title),
            escape("\n".join(risk.objects)),
            escape(risk.evidence),
            escape(risk.tested_by.command()),
        )
    return table


def _show(console: Console, advice: Advice) -> None:
    if advice.risks:
        console.print(_table(advice))
    else:
        console.print("[green]no risk found[/]")
    for note in advice.notes:
        console.print(f"  · {escape(note)}", highlight=False)
    for problem in advice.problems:
        console.print(f"[red]  ✗ {escape(problem)}[/]", highlight=False)


def _findings(request: AdviceRequest) -> tuple[list[Finding], str]:
    """The journals' findings, or why there are none (a journal or rule file unreadable:
    the risks are still listed)."""
    try:
        return findings_of_paths(request.journals), ""
    except (JournalError, FindingRulesError) as exc:
        return [], f"no findings from the journals: {exc}"


_CLUSTER_OPTIONS = (
    "kubeconfig",
    "context",
    "namespace",
    "db_dsn",
    "prometheus_url",
    "pool_env",
    "pool_annotation",
    "node_label",
    "envoy",
)


def _asks_for_a_cluster(args: argparse.Namespace) -> bool:
    return any(getattr(args, option, None) for option in _CLUSTER_OPTIONS)


def handle(args: argparse.Namespace, console: Console) -> int:
    if args.journal and not _asks_for_a_cluster(args):
        return handle_journals(args, console)  # findings of runs only
    try:
        request = request_of(args)
        api = api_client()
    except (InvalidArgument, KubernetesError) as exc:
        hint = "" if args.journal else "; or --journal J [J ...] for the findings of runs"
        console.print(f"[red]gameday advise: {escape(str(exc))}{hint}[/]", highlight=False)
        return EXIT_INVALID
    try:
        advice = gather_advice(api, request)
    except ChaosExtError as exc:  # a journal that cannot be read
        console.print(f"[red]gameday advise: {escape(str(exc))}[/]", highlight=False)
        return EXIT_INVALID
    findings, why_not = _findings(request) if args.journal else ([], "")
    if args.json:
        document = advice.as_dict()
        if args.journal:
            document["findings"] = [f.as_dict() for f in findings]
            document["notes"] = [*document.get("notes", []), *([why_not] if why_not else [])]
        sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
        return exit_code(advice)
    _show(console, advice)
    if why_not:
        console.print(f"  · {escape(why_not)}", highlight=False)
    elif args.journal:
        show_findings(findings, no_color=args.no_color)
    return exit_code(advice)
