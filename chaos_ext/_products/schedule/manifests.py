"""Kubernetes manifests for a scheduled, in-cluster game day (pure).

Objects: a ConfigMap holding the experiment files; a ServiceAccount; the
least-privilege Role(s)/ClusterRole and their bindings, from the merged rules
of :mod:`.permissions`; optionally a PersistentVolumeClaim for the reports;
a CronJob (``concurrencyPolicy: Forbid``, no retries: a game day is not
replayed by Kubernetes behind the operators' backs) whose container runs
``gameday run`` and then ``gameday report`` into ``/reports/<UTC time>/``, then
an optional push command, and exits with the run's code. With ``ssh_secret``,
that Secret (an SSH key and ``known_hosts``) is mounted read-only as files in
:data:`SSH_DIR`, and ``GAMEDAY_SSH_KEY_FILE`` / ``GAMEDAY_SSH_KNOWN_HOSTS`` name
them (the variables the shipped experiments read for ``ssh:`` and ``pod:`` targets).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

import yaml

from chaos_ext._products.schedule.permissions import Permissions, policy_rules
from chaos_ext._runner.signals import TERMINATION_GRACE_S

__all__ = [
    "ABORT_KEY",
    "RUNNER_UID",
    "SSH_DIR",
    "SSH_KEY",
    "SSH_KNOWN_HOSTS",
    "ScheduleSpec",
    "check_cron",
    "check_name",
    "manifests",
    "manifests_yaml",
]

RUNNER_UID = 10001  # the user of deploy/Dockerfile
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,?-]+$")
_CRON_MACROS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
_MAX_CONFIGMAP = 1_000_000
_RBAC = "rbac.authorization.k8s.io/v1"
ABORT_KEY = "gameday-abort-plan.yaml"
SSH_DIR = "/etc/gameday/ssh"
SSH_KEY = "ssh-privatekey"  # the key of a kubernetes.io/ssh-auth Secret
SSH_KNOWN_HOSTS = "known_hosts"
_TMP = "/tmp"  # noqa: S108 - the container's own emptyDir, not this machine's /tmp


@dataclass(frozen=True)
class ScheduleSpec:
    """What to schedule and how (see ``gameday schedule --help``)."""

    name: str
    namespace: str
    cron: str
    image: str
    experiments: dict[str, str]  # ConfigMap key (file name) -> file content
    target_namespaces: tuple[str, ...] = ()
    all_namespaces: bool = False
    pvc: str | None = None  # existing claim to use
    no_pvc: bool = False  # reports and ledger on an emptyDir: gone with the pod
    pvc_size: str = "1Gi"
    storage_class: str | None = None
    push_command: str | None = None
    run_args: tuple[str, ...] = ()
    env_from_secrets: tuple[str, ...] = ()
    abort_plan: str | None = None  # `gameday run --abort-on` plan (YAML text)
    deadline_seconds: int = 3600
    time_zone: str | None = None
    ssh_secret: str | None = None  # a Secret with ssh-privatekey and known_hosts
    labels: dict[str, str] = field(default_factory=dict)


def check_name(label: str, value: str, max_len: int = 52) -> str:
    """A DNS-1123 label (a CronJob name is at most 52 characters)."""
    if not value or len(value) > max_len or not _NAME.match(value):
        raise ValueError(
            f"{label} {value!r}: use lowercase letters, digits and '-', at most {max_len} chars"
        )
    return value


def check_cron(value: str) -> str:
    """A CronJob schedule: five fields, or a macro such as @daily."""
    fields = value.split()
    if value.strip() in _CRON_MACROS:
        return value.strip()
    if len(fields) != 5 or not all(_CRON_FIELD.match(f) for f in fields):
        raise ValueError(f"--cron {value!r}: expected five fields like '0 10 * * 2' or @daily")
    return " ".join(fields)


def _check_experiments(experiments: dict[str, str]) -> None:
    if ABORT_KEY in experiments:
        raise ValueError(f"an experiment file may not be named {ABORT_KEY} (the abort plan's key)")
    for key in experiments:
        if not _KEY.match(key):
            raise ValueError(f"experiment file name {key!r}: only letters, digits, '-', '_', '.'")
    size = sum(len(k) + len(v.encode()) for k, v in experiments.items())
    if size > _MAX_CONFIGMAP:
        raise ValueError(f"the experiments take {size} bytes; a ConfigMap holds at most ~1 MiB")


def _meta(spec: ScheduleSpec, name: str, namespace: str | None = None) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "gameday", "app.kubernetes.io/instance": spec.name}
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {**labels, **spec.labels}
    return meta


def _binding(spec: ScheduleSpec, kind: str, name: str, namespace: str | None) -> dict[str, Any]:
    return {
        "apiVersion": _RBAC,
        "kind": f"{kind}Binding",
        "metadata": _meta(spec, name, namespace),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": spec.name, "namespace": spec.namespace}],
    }


def _rbac(spec: ScheduleSpec, perms: Permissions) -> list[dict[str, Any]]:
    cluster = list(perms.cluster_rules)
    namespaced = list(perms.namespaced_rules)
    if spec.all_namespaces:
        cluster, namespaced = cluster + namespaced, []
    name = spec.name
    objects: list[dict[str, Any]] = []
    if cluster:
        meta = _meta(spec, name)
        objects.append(
            {
                "apiVersion": _RBAC,
                "kind": "ClusterRole",
                "metadata": meta,
                "rules": policy_rules(cluster),
            }
        )
        objects.append(_binding(spec, "ClusterRole", name, None))
    for namespace in (spec.target_namespaces or (spec.namespace,)) if namespaced else ():
        meta = _meta(spec, name, namespace)
        objects.append(
            {
                "apiVersion": _RBAC,
                "kind": "Role",
                "metadata": meta,
                "rules": policy_rules(namespaced),
            }
        )
        objects.append(_binding(spec, "Role", name, namespace))
    return objects


def _script(spec: ScheduleSpec) -> str:
    files = " ".join(shlex.quote(f"/experiments/{key}") for key in sorted(spec.experiments))
    abort = ("--abort-on", f"/experiments/{ABORT_KEY}") if spec.abort_plan else ()
    extra = " ".join(shlex.quote(a) for a in (*abort, *spec.run_args))
    lines = [
        'run="$(date -u +%Y%m%dT%H%M%SZ)"',
        'out="/reports/$run"',
        'mkdir -p "$out/run" /reports/.ledger',
        # the shell is PID 1: it passes SIGTERM (pod deletion, deadline) on to the runner,
        # which rolls back and writes its journal within the grace period
        "term=0 pid=",
        'trap \'term=1; [ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null\' TERM INT',
        f'gameday run --journal-dir "$out/run" {extra} {files} &'.replace("  ", " "),
        'pid=$!; [ "$term" -eq 0 ] || kill -TERM "$pid" 2>/dev/null',
        'wait "$pid"; code=$?',
        'while kill -0 "$pid" 2>/dev/null; do wait "$pid"; code=$?; done',
        '[ "$term" -eq 0 ] || exit "$code"  # stopped: journal written, no time for a report',
        f'gameday report "$out/run" -o "$out" --title "{spec.name} game day $run" '
        '|| [ "$code" -ne 0 ] || code=2',
    ]
    if spec.push_command:
        lines += [
            'export REPORT_DIR="$out"',
            f'( {spec.push_command} ) || [ "$code" -ne 0 ] || code=2',
        ]
    lines.append('exit "$code"')
    return "\n".join(lines) + "\n"


def _ssh_env(spec: ScheduleSpec) -> list[dict[str, str]]:
    if not spec.ssh_secret:
        return []
    return [
        {"name": "GAMEDAY_SSH_KEY_FILE", "value": f"{SSH_DIR}/{SSH_KEY}"},
        {"name": "GAMEDAY_SSH_KNOWN_HOSTS", "value": f"{SSH_DIR}/{SSH_KNOWN_HOSTS}"},
    ]


def _container(spec: ScheduleSpec, in_cluster: bool) -> dict[str, Any]:
    ssh = [{"name": "ssh", "mountPath": SSH_DIR, "readOnly": True}] if spec.ssh_secret else []
    return {
        "name": "gameday",
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c", _script(spec)],
        "env": [
            {"name": "GAMEDAY_LEDGER", "value": "/reports/.ledger/ledger.sqlite3"},
            {"name": "GAMEDAY_LEDGER_MARKERS", "value": "/reports/.ledger-markers"},
            # loads from many pods (drive_http_load replicas > 1) run this same image
            {"name": "GAMEDAY_IMAGE", "value": spec.image},
            {"name": "HOME", "value": _TMP},
            {"name": "MPLCONFIGDIR", "value": f"{_TMP}/matplotlib"},
            *_ssh_env(spec),
            # the Kubernetes clients use the pod's ServiceAccount (chaos_ext._core.k8s)
            *([{"name": "CHAOSTOOLKIT_IN_POD", "value": "true"}] if in_cluster else []),
        ],
        "envFrom": [{"secretRef": {"name": s}} for s in spec.env_from_secrets],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "resources": {
            "requests": {"cpu": "100m", "memory": "256Mi"},
            "limits": {"memory": "1Gi"},
        },
        "volumeMounts": [
            {"name": "experiments", "mountPath": "/experiments", "readOnly": True},
            {"name": "reports", "mountPath": "/reports"},
            {"name": "tmp", "mountPath": _TMP},
            *ssh,
        ],
    }


def _volumes(spec: ScheduleSpec) -> list[dict[str, Any]]:
    if spec.no_pvc:
        reports: dict[str, Any] = {"name": "reports", "emptyDir": {}}
    else:
        reports = {"name": "reports", "persistentVolumeClaim": {"claimName": _claim(spec)}}
    ssh = []
    if spec.ssh_secret:  # owner root, group fsGroup (the runner's): readable by the runner only
        ssh = [{"name": "ssh", "secret": {"secretName": spec.ssh_secret, "defaultMode": 0o440}}]
    return [
        {"name": "experiments", "configMap": {"name": f"{spec.name}-experiments"}},
        reports,
        {"name": "tmp", "emptyDir": {}},
        *ssh,
    ]


def _claim(spec: ScheduleSpec) -> str:
    return spec.pvc or f"{spec.name}-reports"


def _cronjob(spec: ScheduleSpec, perms: Permissions) -> dict[str, Any]:
    pod_spec = {
        "serviceAccountName": spec.name,
        "automountServiceAccountToken": bool(perms.rules),
        "restartPolicy": "Never",
        # SIGTERM to exit: rollback and journal (chaos_ext._runner.signals, docs/ledger.md)
        "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUNNER_UID,
            "runAsGroup": RUNNER_UID,
            "fsGroup": RUNNER_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [_container(spec, in_cluster=bool(perms.rules))],
        "volumes": _volumes(spec),
    }
    cron: dict[str, Any] = {
        "schedule": spec.cron,
        "concurrencyPolicy": "Forbid",
        "startingDeadlineSeconds": 600,
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 3,
        "jobTemplate": {
            "spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": spec.deadline_seconds,
                "template": {"metadata": {"labels": _meta(spec, "")["labels"]}, "spec": pod_spec},
            }
        },
    }
    if spec.time_zone:
        cron["timeZone"] = spec.time_zone
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": _meta(spec, spec.name, spec.namespace),
        "spec": cron,
    }


def _pvc(spec: ScheduleSpec) -> list[dict[str, Any]]:
    if spec.pvc or spec.no_pvc:
        return []
    claim: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": spec.pvc_size}},
    }
    if spec.storage_class:
        claim["storageClassName"] = spec.storage_class
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": _meta(spec, _claim(spec), spec.namespace),
            "spec": claim,
        }
    ]


def manifests(spec: ScheduleSpec, perms: Permissions) -> list[dict[str, Any]]:
    """Every object, in apply order."""
    check_name("--name", spec.name)
    for namespace in (spec.namespace, *spec.target_namespaces):
        check_name("namespace", namespace, max_len=63)
    check_cron(spec.cron)
    _check_experiments(spec.experiments)
    if spec.no_pvc and spec.pvc:
        raise ValueError("--no-pvc and --reports-pvc: choose one")
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(spec, f"{spec.name}-experiments", spec.namespace),
        "data": {
            **dict(sorted(spec.experiments.items())),
            **({ABORT_KEY: spec.abort_plan} if spec.abort_plan else {}),
        },
    }
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _meta(spec, spec.name, spec.namespace),
        "automountServiceAccountToken": bool(perms.rules),
    }
    return [config_map, account, *_rbac(spec, perms), *_pvc(spec), _cronjob(spec, perms)]


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (experiment files, the job's script) as literal blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def manifests_yaml(objects: list[dict[str, Any]]) -> str:
    """A multi-document YAML stream for ``kubectl apply -f``."""
    return yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, default_flow_style=False)
