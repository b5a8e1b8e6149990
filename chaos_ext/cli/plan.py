"""``gameday plan``: resolve each fault's targets as the run would; check, touch nothing."""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chaoslib import substitute
from chaoslib.configuration import load_configuration
from chaoslib.secret import load_secrets
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chaos_ext._core.contract import missing_privileges, plan_function_of, role_of
from chaos_ext._runner.execute import EXIT_DEVIATED, EXIT_HELD, EXIT_INVALID
from chaos_ext._runner.redact import Redactor, secret_values
from chaos_ext.cli._admission import Admitted, admit
from chaos_ext.cli._options import add_kube_options, add_var_options
from chaos_ext.errors import PrivilegeMissing

__all__ = ["handle", "plan_experiment", "privilege_refusals", "refusals", "register"]

HELP = """\
Show what each experiment would touch, touching nothing. Every action of the
method is resolved as `gameday run` resolves it (configuration and secrets
loaded, ${...} substituted, refs followed), then handed to its fault's plan
function (docs/conventions.md §7): `<domain>.actions.add_latency` is planned by
`<domain>.plan.plan_add_latency`, which reads the live target (the qdisc tree,
the database's max_connections and current use, the nodes, pods and
PodDisruptionBudgets...) and checks each preflight the action would check.
Nothing is injected and nothing is recorded in the fault ledger.

Permissions are preflights too, checked with the credentials the run will use:
RBAC (the API server is asked, one SelfSubjectAccessReview per call the
action and its undo make: a node drain, a sidecar template change, a load
from a Kubernetes Job, a pod: target; each denied call is its own failed
check naming the verb, resource and namespace), CAP_NET_ADMIN of this
process for a local network/DNS target, and for an ssh:/pod: target whether
SSH reaches it (the configured user and key, host key checked, `true` run)
and the SSH user has CAP_NET_ADMIN there. For example:

  ✗ RBAC: create pods/eviction: create pods/eviction is denied in namespace
    shop (needed to evict its pods)
  ✗ CAP_NET_ADMIN: this process (pid 18800, uid 0) lacks CAP_NET_ADMIN in its
    effective set (CapEff 0x1fffeffefff, bit 12 clear): changing netns:app
    would fail; ...
  ✗ SSH reachable: unreachable: ssh root@127.0.0.1:44595: cannot connect:
    127.0.0.1: Connection refused

(docs/conventions.md §7 has the whole example.)

--kubeconfig FILE and --context NAME choose the cluster (else $KUBECONFIG or
~/.kube/config, and its current context). A missing privilege is a refusal,
one line each after the table, as `gameday run` refuses before it injects
anything: no way to reach the cluster ("no kubeconfig found: tried
--kubeconfig, $KUBECONFIG, ~/.kube/config, in-cluster ...", without retrying
localhost), or no CAP_NET_ADMIN where a fault changes a network stack. An
action without a plan function is listed as "no plan: <module>.<func>".
--json FILE writes every plan as JSON for review tools.

Exit code: 0 every action was planned and every preflight passed; 1 a preflight
failed, a plan function raised, or an action has no plan; 3 invalid input, or
a privilege missing (refused).

`gameday run --dry-run EXPERIMENT...` is the same command (same table, --json,
exit codes), with the experiments admitted as a run admits them; inside the
sandbox: `gameday sandbox run --dry-run experiments/sandbox/*.json`.
"""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "plan",
        help="show each fault's blast radius and preflights, inject nothing",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("experiments", nargs="+", metavar="EXPERIMENT", help="JSON/YAML files")
    parser.add_argument("--json", metavar="FILE", help="write the plans as JSON to FILE")
    add_var_options(parser)
    add_kube_options(parser, purpose="the cluster whose targets and permissions are planned")
    parser.set_defaults(handler=handle)


def _declared(experiment: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    steady = (experiment.get("steady-state-hypothesis") or {}).get("probes") or []
    return {
        a["name"]: a
        for a in [*steady, *(experiment.get("method") or [])]
        if isinstance(a, dict) and "name" in a
    }


def _scoped(provider: Mapping[str, Any], secrets: Mapping[str, Any]) -> dict[str, Any]:
    """The secrets chaoslib hands the provider: its listed scopes, merged."""
    merged: dict[str, Any] = {}
    for scope in provider.get("secrets") or []:
        merged.update(dict(secrets.get(scope) or {}))
    return merged


def _row(name: str, where: str, **rest: Any) -> dict[str, Any]:
    return {"activity": name, "provider": where, **rest}


def _plan_one(
    activity: Mapping[str, Any], configuration: dict[str, Any], secrets: dict[str, Any]
) -> dict[str, Any]:
    provider = activity.get("provider") or {}
    name = str(activity.get("name", ""))
    where = f"{provider.get('module')}.{provider.get('func')}"
    if provider.get("type") != "python":
        return _row(name, str(provider.get("type")), status="no plan", plan=None)
    func = getattr(importlib.import_module(provider["module"]), provider["func"])
    role = role_of(func)
    planner = plan_function_of(provider["module"], provider["func"])
    if planner is None:
        kind = (role or {}).get("role", "undeclared")
        return _row(name, where, status="no plan", role=kind, plan=None)
    arguments = substitute(dict(provider.get("arguments") or {}), configuration, secrets)
    try:
        plan = planner(
            **arguments, configuration=dict(configuration), secrets=_scoped(provider, secrets)
        )
    except PrivilegeMissing as exc:  # no credentials for the cluster, no capability
        error = f"{type(exc).__name__}: {exc}"
        return _row(name, where, status="refused", error=error, refused=[str(exc)], plan=None)
    except Exception as exc:  # noqa: BLE001 - a plan that cannot be made is a finding, not a crash
        return _row(name, where, status="error", error=f"{type(exc).__name__}: {exc}", plan=None)
    if missing := missing_privileges(plan):
        return _row(name, where, status="refused", refused=missing, plan=plan)
    ok = all(check["ok"] for check in plan["preflight"])
    return _row(name, where, status="ok" if ok else "preflight failed", plan=plan)


def refusals(path: Path, rows: list[dict[str, Any]]) -> list[str]:
    """One line per privilege an action of ``path`` lacks (its plan says so): the run
    would fail at that action, so ``gameday run`` refuses before it injects anything."""
    return [
        f"refused: {path}: {row['activity']}: {line}; nothing injected"
        for row in rows
        for line in row.get("refused") or []
    ]


def privilege_refusals(admitted: Admitted) -> list[str]:
    """The refusal lines of every admitted experiment (empty: every privilege is there).

    Each action's own plan function is asked (docs/conventions.md §7): no fault kind is
    named here, a new one is covered by declaring its plan. An action without a plan is
    not checked; a plan that fails for another reason is left to the run."""
    return [
        line
        for path, experiment in admitted.experiments
        for line in refusals(
            path, plan_experiment(experiment, admitted.config_vars, admitted.secret_vars)
        )
    ]


def plan_experiment(
    experiment: Mapping[str, Any],
    config_vars: Mapping[str, Any] | None = None,
    secret_vars: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One row per action of the method, with its plan (or why there is none)."""
    from chaos_ext._core.ssh import shared_connections  # noqa: PLC0415 - paramiko on demand

    configuration = load_configuration(
        dict(experiment.get("configuration") or {}), dict(config_vars or {})
    )
    secrets = load_secrets(
        dict(experiment.get("secrets") or {}), configuration, dict(secret_vars or {})
    )
    declared = _declared(experiment)
    redactor = Redactor(secret_values(secrets))
    rows = []
    with shared_connections():  # one SSH login per node for all the plans' checks
        for step in experiment.get("method") or []:
            activity = declared.get(step["ref"], step) if "ref" in step else step
            if activity.get("type") == "action":
                rows.append(redactor.value(_plan_one(activity, configuration, secrets)))
    return rows


def _scalar(value: Any) -> str:
    if isinstance(value, str | int | float | bool) or value is None:
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ", ".join(str(v) for v in value) or "-"
    return json.dumps(value, default=str, separators=(",", ":"))


def _radius_text(radius: Mapping[str, Any]) -> str:
    shown = []
    for key, value in radius.items():
        text = _scalar(value)
        shown.append(f"{key}={text if len(text) <= 160 else text[:157] + '...'}")
    return "\n".join(shown)


def _checks_text(plan: Mapping[str, Any]) -> str:
    return "\n".join(
        f"{'✓' if c['ok'] else '✗'} {c['check']}: {c['detail']}" for c in plan["preflight"]
    )


def _table(path: Path, title: str, rows: list[dict[str, Any]]) -> Table:
    table = Table(title=f"{path} — {title}", show_lines=True, title_justify="left")
    for column in ("activity", "would", "preflight", "blast radius"):
        table.add_column(column, overflow="fold")
    for row in rows:
        plan = row["plan"]
        if plan is None:
            why = "refused (below)" if row.get("refused") else row.get("error")
            why = why or f"no plan: {row['provider']}"
            table.add_row(escape(row["activity"]), escape(why), "", "")
            continue
        table.add_row(
            escape(row["activity"]),
            escape(plan["would"]),
            escape(_checks_text(plan)),
            escape(_radius_text(plan["blast_radius"])),
        )
    return table


def handle(args: argparse.Namespace, console: Console) -> int:
    admitted = admit(args, args.experiments, console, secrets=True)
    if admitted is None:
        return EXIT_INVALID
    report: list[dict[str, Any]] = []
    statuses: list[str] = []
    refused: list[str] = []
    for path, experiment in admitted.experiments:
        rows = plan_experiment(experiment, admitted.config_vars, admitted.secret_vars)
        console.print(_table(path, str(experiment.get("title", "")), rows))
        report.append({"experiment": str(path), "title": experiment.get("title"), "actions": rows})
        statuses += [str(row["status"]) for row in rows]
        refused += refusals(path, rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"plans": report}, indent=2, default=str) + "\n")
    for line in refused:
        console.print(f"[red]✗ {escape(line)}[/]", highlight=False)
    if refused:
        return EXIT_INVALID
    clean = all(status == "ok" for status in statuses)
    return EXIT_HELD if clean else EXIT_DEVIATED
