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

from chaos_ext._core.contract import PlanCall, plan_for, plan_result, preflight_check
from chaos_ext._core.k8s import IDENTITY_RULE, api_client
from chaos_ext._core.k8s_access import Access, access_checks, accesses
from chaos_ext.load import _locate
from chaos_ext.load.actions import _Parsed, drive_http_load

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


@plan_for(drive_http_load)
def plan_drive_http_load(call: PlanCall) -> dict[str, Any]:
    """The URLs ``drive_http_load`` would load, at what rate, for how long, from where."""
    parsed: _Parsed = call.parsed  # checked and parsed once, by the action's own check
    spec, settings = parsed
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
    if settings is not None:  # a load from a Kubernetes Job
        replicas = call.arguments["replicas"]
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
            *access_checks(api_client(call.secrets), _job_accesses(settings.namespace)),
        ]
    else:
        radius["mode"] = "local"
        timeout = min(call.arguments["timeout_seconds"], 5.0)
        checks = [_reachable(u, timeout) for u in spec.urls]
    return plan_result(
        action="drive_http_load",
        targets=shown,
        would=f"send about {spec.total_requests} {spec.method} request(s) at up to"
        f" {spec.peak_rate:g}/s for {spec.duration:g} s from {source}",
        preflight=checks,
        blast_radius=radius,
    )
