"""Load actions: drive open-loop HTTP load in the background, and stop it."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chaos_ext.errors import InvalidArgument, LoadError
from chaos_ext.ledger import Entry, default_ledger, in_scope, undo, undo_handler
from chaos_ext.load import _distributed, _job, _locate, _push, _recorded
from chaos_ext.load.driver import load_results, stop_load
from chaos_ext.load.spec import check_load_arguments, spec_from_arguments
from chaos_ext.rbac import needs_k8s
from chaos_ext.validation import validated_by

__all__ = ["drive_http_load", "stop_http_load"]

KIND = _locate.KIND


def _check(arguments: Mapping[str, Any]) -> None:
    if "urls" not in arguments:
        raise InvalidArgument("urls: required (one URL or a list of URLs)")
    check_load_arguments(arguments)
    if _job.uses_kubernetes(arguments):
        _job.settings_from(arguments.get("kubernetes"), arguments.get("replicas", 1))


@validated_by(_check)
@needs_k8s(*_job.RULES, when=_job.uses_kubernetes)
def drive_http_load(
    urls: list[str] | str,
    rate: float = 10.0,
    duration: float = 0.0,
    ramp: dict[str, Any] | None = None,
    steps: list[dict[str, Any]] | None = None,
    concurrency_limit: int = 64,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: str = "",
    http2: bool = False,
    timeout: float = 5.0,
    max_rate: float = 0.0,
    max_duration: float = 0.0,
    processes: int = 0,
    metrics_port: int = 0,
    metrics_addr: str = "127.0.0.1",
    name: str = "",
    ca_file: str = "",
    wait: bool = False,
    replicas: int = 1,
    kubernetes: dict[str, Any] | None = None,
    configuration: dict[str, Any] | None = None,
    secrets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Send open-loop HTTP load (constant rate, ramp or steps) to the named URLs.

    Requests leave at the profile's arrival times whatever the server does;
    latency is measured from the scheduled time (no coordinated omission). At
    most ``concurrency_limit`` requests are in flight (one per connection); an
    arrival that finds them all busy waits for one (the wait counts in its
    latency) and is counted as ``dropped`` after ``timeout`` s. ``duration`` 0
    means 30 s for a constant rate, the ramp's ``over`` for a ramp ``{"from":
    10, "to": 200, "over": 60}``, the steps' total for steps ``[{"rate": 10,
    "for": 20}, ...]``. Above 500 req/s or 600 s the load is refused unless
    ``max_rate`` / ``max_duration`` are set to cover it. ``http2`` true speaks
    HTTP/2 only (h2c prior knowledge on http://).

    Blast radius: only ``urls`` (redirects are not followed), at most the
    profile's rate for its duration. Runs in a helper process recorded in the
    ledger, so it returns at once and keeps going while the next activities
    inject faults (``wait`` true blocks until done and returns the results).
    Pair it with the ``stop_http_load`` rollback, which returns the per-second
    results; ``load_window_stats`` judges a window. ``metrics_port`` (-1 for a
    free port) serves Prometheus metrics of the load on ``metrics_addr``.
    https certificates are verified (``ca_file``: a PEM bundle to trust).

    ``replicas`` > 1 (with ``kubernetes``: ``namespace``, ``pushgateway`` the
    pods push their per-second results to, optional ``image``, ``start_delay``,
    ``cpu``, ``memory``, ``service_account``, ``node_selector``) runs the same
    load from a Kubernetes Indexed Job of that many pods, each taking a 1/N
    share of the schedule from a common start; ``stop_http_load`` and
    ``load_window_stats`` merge every pod's results. The ledger owns the Job:
    the undo deletes it with foreground propagation. Needs create/get/delete
    on jobs and create/delete on secrets in that namespace.
    """
    arguments = {k: v for k, v in locals().items() if k not in ("configuration", "secrets")}
    _check(arguments)
    spec = spec_from_arguments(arguments)
    if _job.uses_kubernetes(arguments):
        return _drive_job(spec, arguments, secrets)
    entry, load = _recorded.start_recorded(spec, module=__name__)
    started = {
        "load_id": entry.id, "name": name, "results_dir": str(load.results_dir),
        "start": load.start, "end": load.end, "processes": load.processes,
        "metrics_port": load.metrics_port, "peak_rate": spec.peak_rate,
        "duration": spec.duration, "expected_requests": spec.total_requests,
    }  # fmt: skip
    if not wait:
        return started
    return {**started, "results": _recorded.finish(entry, load, spec)}


def _drive_job(
    spec: Any, arguments: Mapping[str, Any], secrets: Mapping[str, Any] | None
) -> dict[str, Any]:
    settings = _job.settings_from(arguments["kubernetes"], arguments["replicas"])
    replicas = int(arguments["replicas"])
    entry, meta = _distributed.start_job_load(spec, replicas, settings, secrets, __name__)
    started = {
        "load_id": entry.id, "name": spec.name, "results_dir": meta["results_dir"],
        "start": meta["start"], "end": meta["end"], "processes": meta["processes"],
        "replicas": replicas, "job": f"{settings.namespace}/{meta['job']}",
        "image": settings.image, "peak_rate": spec.peak_rate, "duration": spec.duration,
        "expected_requests": spec.total_requests,
    }  # fmt: skip
    if not arguments.get("wait"):
        return started
    _distributed.wait_done(entry, max(0.0, meta["end"] - time.time()) + 2 * spec.timeout + 60)
    return {**started, "results": stop_http_load(entry.id)}


@undo_handler(KIND)
def _undo_load(entry: Entry) -> str:
    """Stop the load's processes (or Job); a load that never started (no results) just closes."""
    if entry.recipe.get("mode") == "kubernetes":
        return _distributed.delete_job(entry)
    stopped = stop_load(entry.id)
    results_dir = Path(entry.recipe.get("results_dir") or "")
    if not entry.recipe.get("results_dir") or not (results_dir / "meta.json").exists():
        if stopped:
            return f"stopped the load ({stopped} process(es)) before it wrote any results"
        return "the load never started (no process, no results): nothing to stop"
    try:
        summary = load_results(results_dir, include_buckets=False)
        sent = f"; {summary['sent']} requests sent, error ratio {summary['error_ratio']}"
    except LoadError as exc:
        sent = f"; its results cannot be read ({exc})"
    if not stopped:
        return f"load had already finished{sent}"
    return f"stopped the load ({stopped} process(es)){sent}"


@validated_by()
def stop_http_load(
    load: str = "",
    include_buckets: bool = True,
    include_dead_runs: bool = False,
    configuration: dict[str, Any] | None = None,
    secrets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Stop a background HTTP load and return its per-second results (a rollback).

    ``load`` is the ``load_id`` returned by ``drive_http_load`` or its
    ``name``; empty means this run's latest load. Idempotent: a load that has
    already finished (or was already stopped) just has its results returned;
    no load at all returns ``{"stopped": false}``. Blast radius: only this
    run's loads are stopped (``include_dead_runs``: also loads left by runs
    whose runner is dead); another live run's load is never stopped, only
    its results are read.
    """
    entry = _locate.find_load(load, required=False)
    if entry is None:
        return {"stopped": False, "note": f"no HTTP load {load or 'in this run'} in the ledger"}
    mine = in_scope([entry], include_dead_runs=include_dead_runs)
    if entry.state == "open" and not mine:
        alive = "is still running" if entry.owner_alive() else "is dead (include_dead_runs)"
        note = f"not stopped: it belongs to run {entry.run_id}, whose runner {alive}"
        stopped = {"stopped": False, "load_id": entry.id, "note": note}
    else:
        outcome = undo(entry)
        stopped = {"stopped": outcome.ok, "load_id": entry.id, "note": outcome.note}
    if entry.recipe.get("mode") == "kubernetes" and stopped["stopped"]:
        try:
            _collect_pods(entry)
        except LoadError as exc:
            return {**stopped, "results": None, "results_error": str(exc)}
    try:
        summary = load_results(
            Path(entry.recipe.get("results_dir", "")), include_buckets=include_buckets
        )
    except LoadError as exc:
        return {**stopped, "results": None, "results_error": str(exc)}
    return {**stopped, **summary}


def _collect_pods(entry: Entry) -> None:
    """The pods' results, kept locally; then the Pushgateway forgets them (once)."""
    _distributed.finalize(entry)
    recipe = default_ledger().get(entry.id)
    if recipe is not None and not recipe.recipe.get("forgotten"):
        _push.forget_load(entry.recipe["kubernetes"]["pushgateway_read"], entry.id)
        default_ledger().update_recipe(entry.id, {**recipe.recipe, "forgotten": True})
