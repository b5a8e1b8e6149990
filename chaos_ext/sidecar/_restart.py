"""Restart drifted workloads through their pod template, and wait for each rollout.

The shell around :mod:`._rollout` (which decides what to restart and reads a
rollout's status): one patch per workload adds the rollout annotations, then
the workload is polled until ``kubectl rollout status`` would call it done.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from chaos_ext._core.k8s import call, read_json
from chaos_ext._core.wait import poll
from chaos_ext.sidecar._drift import WorkloadDrift
from chaos_ext.sidecar._rollout import restart_patch, rollout_status
from chaos_ext.sidecar.errors import SidecarError

__all__ = ["restart_all"]

_APIS = {
    "Deployment": ("patch_namespaced_deployment", "read_namespaced_deployment"),
    "StatefulSet": ("patch_namespaced_stateful_set", "read_namespaced_stateful_set"),
    "DaemonSet": ("patch_namespaced_daemon_set", "read_namespaced_daemon_set"),
}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _restart_one(
    apps: client.AppsV1Api,
    w: WorkloadDrift,
    keys: tuple[str, str],
    reason: str,
    *,
    wait: bool,
    deadline: float,
    stop: threading.Event,
) -> dict[str, Any]:
    t0 = time.monotonic()
    patch, read = (getattr(apps, n) for n in _APIS[w.kind])
    why = f"{reason}: {w.differences[0]}" if w.differences else reason
    stamp = _now()
    where = f"{w.kind} {w.namespace}/{w.name}"
    outcome = {
        "kind": w.kind,
        "namespace": w.namespace,
        "name": w.name,
        "drifted": w.drifted,
        "restarted_at": stamp,
        "reason": why[:250],
    }
    try:
        body = restart_patch(keys, timestamp=stamp, reason=why[:250])
        call(
            patch,
            w.name,
            w.namespace,
            body,
            what=f"restart {where}",
            error=SidecarError,
            _preload_content=False,
        )
        if not wait:
            return {**outcome, "complete": None, "status": "restarted, not awaited"}

        def fetch() -> tuple[bool, str]:
            obj = read_json(read, w.name, w.namespace, what=f"read {where}", error=SidecarError)
            return rollout_status(obj)

        left = max(0.0, deadline - time.monotonic())
        done, status = poll(fetch, lambda s: s[0], wait_seconds=left, stop=stop)
    except SidecarError as exc:
        done, status = False, str(exc)
    return {
        **outcome,
        "complete": done,
        "status": status,
        "seconds": round(time.monotonic() - t0, 3),
    }


def restart_all(
    api: client.ApiClient,
    chosen: list[WorkloadDrift],
    keys: tuple[str, str],
    reason: str,
    *,
    parallel: int,
    wait: bool,
    timeout_seconds: float,
) -> list[dict[str, Any]]:
    """Restart ``chosen``, ``parallel`` at a time, each awaited until ``timeout_seconds``.

    One outcome per workload (``complete``: True, False or None when not
    awaited). An interruption stops the waits of the others at once.
    """
    apps = client.AppsV1Api(api)
    deadline = time.monotonic() + timeout_seconds
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = [
            pool.submit(
                _restart_one, apps, w, keys, reason, wait=wait, deadline=deadline, stop=stop
            )
            for w in chosen
        ]
        try:
            return [f.result() for f in futures]
        except BaseException:
            stop.set()
            raise
