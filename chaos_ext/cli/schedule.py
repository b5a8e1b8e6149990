"""``gameday schedule``: Kubernetes manifests for a scheduled in-cluster game day."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from chaos_ext import __version__
from chaos_ext._products.report.model import inline_secrets
from chaos_ext._products.schedule.manifests import (
    SSH_DIR,
    ScheduleSpec,
    manifests,
    manifests_yaml,
)
from chaos_ext._products.schedule.permissions import permissions_of
from chaos_ext._products.schedule.pod_itself import pod_itself_warnings
from chaos_ext._runner.execute import EXIT_INVALID
from chaos_ext.cli._admission import unknown_var_lines, var_format_lines, var_names
from chaos_ext.cli._common import load_valid_experiments
from chaos_ext.cli._options import (
    abort_form,
    abort_plan_of,
    add_abort_options,
    add_var_options,
    alertmanager_url_missing,
)
from chaos_ext.controls.stop_conditions import plan_path
from chaos_ext.errors import InvalidArgument

HELP = """\
Print (or write with -o) the Kubernetes manifests that run these experiments on
a schedule, in the cluster, with Kubernetes as the scheduler:

  ConfigMap        NAME-experiments: the experiment files
  ServiceAccount   NAME
  Role(s)/ClusterRole + bindings   least privilege: exactly the rules that the
                   experiments' activities declare (@needs_k8s); namespaced
                   rules in each --target-namespace (default: --namespace),
                   cluster-scoped ones in a ClusterRole
  PersistentVolumeClaim  NAME-reports (unless --reports-pvc or --no-pvc): the
                   reports and the fault ledger, which outlives the pod
  CronJob          NAME: concurrencyPolicy Forbid, no retries, non-root, read-only
                   root filesystem; runs `gameday run` (with the --abort-on
                   stop conditions if given) then `gameday report` into
                   /reports/<UTC time>/, then --push-command if given
                   (with $REPORT_DIR set), and exits with the run's code

Experiments with literal secret values are refused (they would be stored in a
ConfigMap): use environment secrets ({"type": "env", "key": "DB_PASSWORD"})
and --env-from-secret. --ssh-secret SECRET mounts an SSH key and known_hosts as
files in /etc/gameday/ssh (a kubernetes.io/ssh-auth Secret: its keys
ssh-privatekey and known_hosts) and sets GAMEDAY_SSH_KEY_FILE and
GAMEDAY_SSH_KNOWN_HOSTS to them, for ssh: and pod: targets. The runner image is
built from deploy/Dockerfile and has rclone to push reports off the volume
(--push-command; deploy/README.md shows the Secret that configures the remote).

Experiments are validated first, and each --var name is checked against their
configuration; nothing is contacted. A URL that would point at the pod itself
(127.0.0.1, localhost: in a --var, or a configuration value or environment
default that no --var overrides) is a warning. Activities of
chaostoolkit-kubernetes declare no permissions: they are refused unless
--allow-undeclared (then grant their permissions yourself).

--abort-on takes every form `gameday run --abort-on` takes and is checked the
same way here: one plan or rule file (a built-in plan name is resolved to its
file) is shipped in the ConfigMap, a second one is refused (merge them);
prometheus-alerts, alertmanager and --alerts are passed to the pod's run, and
alertmanager needs alertmanager_url from --var or every experiment's
configuration.

examples:
  gameday schedule experiments/*.json --cron "0 10 * * 2" -o gameday.yaml
  gameday schedule experiments/prometheus-edge-slo.json --cron @daily --abort-on edge
  gameday schedule experiments/db-latency.json --cron @weekly --namespace chaos \\
      --target-namespace shop --image registry.example.com/gameday:0.1.0 \\
      --env-from-secret prometheus-auth
  gameday schedule experiments/db-latency.json --cron "0 3 * * *" \\
      --env-from-secret gameday-reports-remote \\
      --push-command 'rclone copy "$REPORT_DIR" reports:gameday-reports/'
  kubectl apply -f gameday.yaml

deploy/README.md has a worked example (deploy/example/gameday.yaml).
"""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "schedule",
        help="emit CronJob + RBAC manifests for a scheduled game day",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("experiments", nargs="+", metavar="EXPERIMENT")
    parser.add_argument("--cron", required=True, help='schedule, e.g. "0 10 * * 2" or @weekly')
    parser.add_argument("--name", default="gameday", help="CronJob/ServiceAccount name")
    parser.add_argument("--namespace", default="gameday", help="where the CronJob runs")
    parser.add_argument(
        "--target-namespace",
        action="append",
        default=[],
        metavar="NS",
        help="namespace the experiments act on (repeatable)",
    )
    parser.add_argument(
        "--all-namespaces",
        action="store_true",
        help="grant namespaced rules cluster-wide (ClusterRole)",
    )
    parser.add_argument("--image", default=f"gameday:{__version__}", help="runner image")
    parser.add_argument("--reports-pvc", metavar="CLAIM", help="existing claim for reports")
    parser.add_argument("--pvc-size", default="1Gi", help="size of the claim created")
    parser.add_argument("--storage-class", help="storage class of the claim created")
    parser.add_argument(
        "--no-pvc",
        action="store_true",
        help="no claim: reports and the fault ledger on an emptyDir, gone with the pod "
        "(push the reports with --push-command; a run killed with its pod is not recovered)",
    )
    parser.add_argument(
        "--push-command", metavar="SH", help="shell command run after the report, $REPORT_DIR set"
    )
    add_abort_options(parser)  # one file shipped in the ConfigMap: _abort_shipping
    add_var_options(parser, purpose="passed to `gameday run` in the pod", files=False)
    parser.add_argument(
        "--env-from-secret",
        action="append",
        default=[],
        metavar="SECRET",
        help="expose a Secret's keys as environment variables",
    )
    parser.add_argument(
        "--ssh-secret",
        metavar="SECRET",
        help=f"mount this Secret's SSH key and known_hosts as files in {SSH_DIR}",
    )
    parser.add_argument(
        "--deadline",
        type=int,
        default=3600,
        metavar="SECONDS",
        help="activeDeadlineSeconds of each run (default 3600)",
    )
    parser.add_argument("--time-zone", metavar="TZ", help="CronJob timeZone, e.g. Europe/Paris")
    parser.add_argument(
        "--allow-undeclared",
        action="store_true",
        help="accept Kubernetes activities that declare no RBAC",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    parser.set_defaults(handler=handle)


def _spec(args: argparse.Namespace, files: list[Path]) -> ScheduleSpec:
    names = [p.name for p in files]
    if len(set(names)) != len(names):
        raise ValueError("two experiments have the same file name; rename one")
    plan_text, run_args = _abort_shipping(args)
    for var in args.var:
        run_args += ["--var", var]
    return ScheduleSpec(
        name=args.name,
        namespace=args.namespace,
        cron=args.cron,
        image=args.image,
        experiments={p.name: p.read_text() for p in files},
        target_namespaces=tuple(args.target_namespace),
        all_namespaces=args.all_namespaces,
        pvc=args.reports_pvc,
        no_pvc=args.no_pvc,
        pvc_size=args.pvc_size,
        storage_class=args.storage_class,
        push_command=args.push_command,
        run_args=tuple(run_args),
        env_from_secrets=tuple(args.env_from_secret),
        deadline_seconds=args.deadline,
        time_zone=args.time_zone,
        abort_plan=plan_text,
        ssh_secret=args.ssh_secret,
    )


def _shipped_files(values: list[str]) -> list[str]:
    """The --abort-on values that name a file (or a built-in plan): shipped in the ConfigMap."""
    return [v for v in values if abort_form(v) in ("file", "built-in")]


def _abort_shipping(args: argparse.Namespace) -> tuple[str | None, list[str]]:
    """What the pod's `gameday run` gets: the text of the one plan file (a built-in
    plan resolved to its file here), and the other --abort-on words and --alerts."""
    files = _shipped_files(args.abort_on)
    text = plan_path(files[0]).read_text() if files else None
    words = [a for v in args.abort_on if v not in files for a in ("--abort-on", v)]
    return text, words + [a for s in args.alerts for a in ("--alerts", s)]


def _abort_refused(
    args: argparse.Namespace, loaded: list[dict[str, Any]], console: Console
) -> bool:
    """--abort-on as `gameday run` reads it, plus what shipping it needs: one file that
    refers to no other file (the ConfigMap carries that one), and for alertmanager its
    URL given by --var or every experiment's configuration."""
    problems: list[str] = []
    try:
        plan = abort_plan_of(args)
    except InvalidArgument as exc:
        plan, problems = None, [str(exc)]
    files = _shipped_files(args.abort_on)
    if len(files) > 1:
        problems.append(
            f"{', '.join(files)}: schedule ships one plan file in its ConfigMap: merge them "
            "into one plan (prometheus-alerts and alertmanager may be added to it)"
        )
    elif files and plan is not None:
        path = plan_path(files[0]).resolve()
        read = {*plan.rule_files, *(Path(r.source) for r in plan.alerts.rules if r.source)}
        others = sorted(str(p) for p in read if p.resolve() != path)
        if others:
            problems.append(
                f"{files[0]}: refers to {', '.join(others)}, which the ConfigMap would not "
                "carry: put their rules in the plan's file, or give that rule file itself"
            )
    config_vars = dict.fromkeys(var_names(args.var), True)
    missing = {alertmanager_url_missing(plan, e, config_vars, here=False) for e in loaded}
    problems += sorted(m for m in missing if m)
    for problem in problems:
        console.print(f"[red]--abort-on: {escape(problem)}[/]", highlight=False)
    return bool(problems)


def _vars_refused(args: argparse.Namespace, loaded: list[dict[str, Any]], console: Console) -> bool:
    """--var as `gameday run` will check it in the pod: NAME=VALUE, a name they declare."""
    lines = var_format_lines(args.var) or unknown_var_lines(args.var, loaded)
    for line in lines:
        console.print(f"[red]invalid:[/] {escape(line)}", highlight=False)
    return bool(lines)


def _warn_pod_itself(
    args: argparse.Namespace, loaded: list[tuple[Path, Any]], console: Console
) -> None:
    run_vars = dict(zip(var_names(args.var), (v.split("=", 1)[1] for v in args.var), strict=True))
    experiments = {path.name: experiment for path, experiment in loaded}
    for line in pod_itself_warnings(experiments, run_vars):
        console.print(f"[yellow]⚠ {escape(line)}[/]", highlight=False)


def handle(args: argparse.Namespace, console: Console) -> int:
    loaded = load_valid_experiments(args.experiments, console, resolve="nothing")  # in-cluster
    if loaded is None or _vars_refused(args, [e for _, e in loaded], console):
        return EXIT_INVALID
    _warn_pod_itself(args, loaded, console)
    leaky = [str(p) for p, experiment in loaded if any(inline_secrets(experiment.get("secrets")))]
    if leaky:
        console.print(
            f"[red]{escape(', '.join(leaky))}: literal secret values would land in a "
            'ConfigMap; use {"type": "env", "key": ...} secrets and '
            "--env-from-secret[/]"
        )
        return EXIT_INVALID
    perms = permissions_of(experiment for _, experiment in loaded)
    if perms.undeclared:
        listed = ", ".join(perms.undeclared)
        if not args.allow_undeclared:
            console.print(
                f"[red]these activities declare no Kubernetes permissions: "
                f"{escape(listed)} (--allow-undeclared to go on)[/]"
            )
            return EXIT_INVALID
        console.print(f"[yellow]grant these activities' permissions yourself: {escape(listed)}[/]")
    if _abort_refused(args, [e for _, e in loaded], console):
        return EXIT_INVALID
    try:
        objects = manifests(_spec(args, [path for path, _ in loaded]), perms)
    except ValueError as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        return EXIT_INVALID
    text = manifests_yaml(objects)
    if args.output:
        Path(args.output).write_text(text)
        console.print(
            f"wrote {len(objects)} objects to {args.output}", highlight=False, markup=False
        )
    else:
        sys.stdout.write(text)
    return 0
