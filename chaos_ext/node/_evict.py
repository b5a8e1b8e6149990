"""Evict pods through the Eviction API, retrying budget refusals with backoff.

A 429 from ``pods/eviction`` means a PodDisruptionBudget has no disruption
left: the pod is retried with exponential backoff until the drain's deadline.
It is deleted instead only with ``force`` (and says so in its outcome). After
a successful eviction the pod is awaited until it is gone (404, or the name
now belongs to a new pod with another uid, as for StatefulSets).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from chaos_ext._core.k8s import call, read_json, status_of
from chaos_ext.errors import KubernetesError
from chaos_ext.node._drain_plan import PodInfo, backoff_delays

__all__ = ["EvictionSettings", "evict_pods"]


@dataclass(frozen=True)
class EvictionSettings:
    """How evictions are retried and awaited."""

    deadline: float  # time.monotonic() after which nothing is retried
    backoff_initial_seconds: float = 0.5
    backoff_max_seconds: float = 8.0
    parallel: int = 8
    force: bool = False
    wait_for_deletion: bool = True
    grace_period_seconds: int | None = None
    poll_seconds: float = 0.2


def evict_pods(
    core: client.CoreV1Api,
    pods: Sequence[PodInfo],
    settings: EvictionSettings,
    cancel: threading.Event | None = None,
) -> list[dict[str, Any]]:
    """Evict ``pods`` ``settings.parallel`` at a time; one outcome dict per pod, in order."""
    stop = cancel or threading.Event()
    with ThreadPoolExecutor(max_workers=max(1, settings.parallel)) as pool:
        futures = [pool.submit(_evict_one, core, p, settings, stop, i) for i, p in enumerate(pods)]
        try:
            return [f.result() for f in futures]
        except BaseException:
            stop.set()
            raise


def _outcome(pod: PodInfo, outcome: str, reason: str, attempts: int, t0: float) -> dict[str, Any]:
    return {
        "namespace": pod.namespace,
        "name": pod.name,
        "node": pod.node,
        "outcome": outcome,
        "reason": reason,
        "attempts": attempts,
        "seconds": round(time.monotonic() - t0, 3),
    }


def _body(pod: PodInfo, settings: EvictionSettings) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod.name, "namespace": pod.namespace},
    }
    if settings.grace_period_seconds is not None:
        body["deleteOptions"] = {"gracePeriodSeconds": settings.grace_period_seconds}
    return body


def _evict_one(
    core: client.CoreV1Api,
    pod: PodInfo,
    settings: EvictionSettings,
    stop: threading.Event,
    index: int,
) -> dict[str, Any]:
    t0 = time.monotonic()
    delays = backoff_delays(
        settings.backoff_initial_seconds,
        settings.backoff_max_seconds,
        rng=random.Random(index),  # noqa: S311
    )
    attempts = 0
    while not stop.is_set():
        attempts += 1
        try:
            call(
                core.create_namespaced_pod_eviction,
                pod.name,
                pod.namespace,
                body=_body(pod, settings),
                what=f"evict pod {pod.key}",
                _preload_content=False,
            )
        except KubernetesError as exc:
            status = status_of(exc.__cause__)
            if status == 404:
                return _outcome(pod, "gone", "already deleted", attempts, t0)
            if status != 429:
                return _outcome(pod, "failed", str(exc), attempts, t0)
            delay = next(delays)
            if time.monotonic() + delay > settings.deadline:
                return _budget_timeout(core, pod, settings, attempts, t0)
            stop.wait(delay)
            continue
        return _await_deletion(core, pod, settings, stop, attempts, t0, "evicted")
    return _outcome(pod, "cancelled", "the drain was cancelled", attempts, t0)


def _budget_timeout(
    core: client.CoreV1Api, pod: PodInfo, settings: EvictionSettings, attempts: int, t0: float
) -> dict[str, Any]:
    if not settings.force:
        return _outcome(
            pod,
            "blocked",
            "a PodDisruptionBudget still refused the eviction at the timeout (HTTP 429);"
            " not deleted (force=false)",
            attempts,
            t0,
        )
    try:
        call(
            core.delete_namespaced_pod,
            pod.name,
            pod.namespace,
            what=f"delete pod {pod.key} (force, budget bypassed)",
            _preload_content=False,
        )
    except KubernetesError as exc:
        if status_of(exc.__cause__) != 404:
            return _outcome(pod, "failed", str(exc), attempts, t0)
    return _outcome(
        pod,
        "deleted",
        "PodDisruptionBudget still refused at the timeout: deleted (force, budget bypassed)",
        attempts,
        t0,
    )


def _await_deletion(
    core: client.CoreV1Api,
    pod: PodInfo,
    settings: EvictionSettings,
    stop: threading.Event,
    attempts: int,
    t0: float,
    outcome: str,
) -> dict[str, Any]:
    if not settings.wait_for_deletion:
        return _outcome(pod, outcome, "eviction accepted", attempts, t0)
    while time.monotonic() < settings.deadline and not stop.is_set():
        try:
            current = read_json(
                core.read_namespaced_pod, pod.name, pod.namespace, what=f"read pod {pod.key}"
            )
        except KubernetesError as exc:
            if status_of(exc.__cause__) == 404:
                return _outcome(pod, outcome, "evicted and gone", attempts, t0)
            return _outcome(pod, "failed", f"evicted, then {exc}", attempts, t0)
        if (current.get("metadata") or {}).get("uid") != pod.uid:
            return _outcome(
                pod, outcome, "evicted; the name now belongs to a new pod", attempts, t0
            )
        stop.wait(settings.poll_seconds)
    return _outcome(
        pod, "terminating", "evicted but still terminating at the timeout", attempts, t0
    )
