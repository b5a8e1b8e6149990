"""Plan of the HTTP load: the targets, the rate and duration, and in Job mode the pods.

The arguments are checked and the schedule built exactly as
``drive_http_load`` builds it (``spec_from_arguments``); each target's host
is resolved and its port tried once with a TCP connect that is closed at
once. In Job mode, the API server is asked (access reviews) whether the
credentials may create and delete the Job and its Secret. No request is
sent, no process or Job started, nothing recorded.
"""

from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlsplit

from chaos_ext._core.contract import Configuration, Secrets, plan_result, preflight_check
from chaos_ext._core.k8s import IDENTITY_RULE, api_client
from chaos_ext._core.k8s_access import Access, access_checks, accesses
from chaos_ext.load import _job, _locate
from chaos_ext.load.actions import _check
from chaos_ext.load.spec import JOB_KEYS, spec_from_arguments

__all__ = ["plan_drive_http_load"]


def _reachable(url: str, timeout: float) -> dict[str, Any]:
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        return preflight_check("target reachable", False, f"{host}:{port}: {exc}")
    return preflight_check("target reachable", True, f"{host}:{port} accepts TCP")


def _job_accesses(namespace: str) -> list[Access]:
    """What a load from a Job and its undo ask of the API (_distributed.py)."""
    return [
        *accesses(IDENTITY_RULE, why="record the cluster's identity in the ledger"),
        Access("create", "secrets", namespace=namespace, why="hold the load's spec"),
        Access("create", "jobs", "batch", namespace, why="run the load's pods"),
        Access("delete", "jobs", "batch", namespace, why="stop the load and its pods (undo)"),
        Access("delete", "secrets", namespace=namespace, why="delete the spec (undo)"),
    ]


def plan_drive_http_load(
    urls: list[str] | str,
    rate: float = 10.0,
    duration_seconds: float = 0.0,
    ramp: dict[str, Any] | None = None,
    steps: list[dict[str, Any]] | None = None,
    concurrency_limit: int = 64,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: str = "",
    http2: bool = False,
    timeout_seconds: float = 5.0,
    max_rate: float = 0.0,
    max_duration_seconds: float = 0.0,
    processes: int = 0,
    metrics_port: int = 0,
    metrics_addr: str = "127.0.0.1",
    name: str = "",
    ca_file: str = "",
    cause_header: str = "",
    wait: bool = False,
    replicas: int = 1,
    kubernetes: dict[str, Any] | None = None,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """The URLs ``drive_http_load`` would load, at what rate, for how long, from where."""
    arguments = {k: v for k, v in locals().items() if k not in ("configuration", "secrets")}
    _check(arguments)
    spec = spec_from_arguments(arguments, other_keys=JOB_KEYS)
    shown = [_locate.describe_url(u) for u in spec.urls]
    radius: dict[str, Any] = {
        "urls": shown,
        "method": spec.method,
        "peak_rate": spec.peak_rate,
        "duration_seconds": spec.duration,
        "expected_requests": spec.total_requests,
        "concurrency_limit": spec.concurrency_limit,
    }
    source = "this host"
    if _job.uses_kubernetes(arguments):
        settings = _job.settings_from(kubernetes, replicas)
        source = f"an Indexed Job of {replicas} pod(s) in namespace {settings.namespace}"
        radius.update(
            {
                "mode": "kubernetes",
                "replicas": replicas,
                **settings.as_dict(),
                "pods": [f"{settings.namespace}/<job>-{i}" for i in range(replicas)],
                "rate_per_pod": spec.peak_rate / replicas,
            }
        )
        checks = [
            preflight_check("targets", True, "reached from the pods: not tried from here"),
            *access_checks(api_client(secrets), _job_accesses(settings.namespace)),
        ]
    else:
        radius["mode"] = "local"
        checks = [_reachable(u, min(timeout_seconds, 5.0)) for u in spec.urls]
    return plan_result(
        action="drive_http_load",
        targets=shown,
        would=f"send about {spec.total_requests} {spec.method} request(s) at up to"
        f" {spec.peak_rate:g}/s for {spec.duration:g} s from {source}",
        preflight=checks,
        blast_radius=radius,
    )
