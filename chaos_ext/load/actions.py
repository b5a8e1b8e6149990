"""Load actions: drive open-loop HTTP load in the background, and stop it."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from chaos_ext._core.contract import (
    LEDGER_ID,
    Configuration,
    Secrets,
    fault_action,
    roll_back,
    rollback_activity,
)
from chaos_ext._core.ledger import Entry, current_run_id, default_ledger
from chaos_ext._core.rbac import needs_k8s
from chaos_ext._core.validation import PARSED, validated_by
from chaos_ext.errors import InvalidArgument
from chaos_ext.load import _distributed, _job, _locate, _push, _recorded
from chaos_ext.load.driver import load_results, stop_load
from chaos_ext.load.errors import LoadError
from chaos_ext.load.spec import JOB_KEYS, LoadSpec, spec_from_arguments

__all__ = ["drive_http_load", "stop_http_load"]

KIND = _locate.KIND


class _Parsed(NamedTuple):
    """drive_http_load's arguments, checked and parsed once (by ``@validated_by``)."""

    spec: LoadSpec
    job: _job.JobSettings | None  # None: the load runs here, not from a Kubernetes Job


def _check(arguments: Mapping[str, Any]) -> _Parsed:
    if "urls" not in arguments:
        raise InvalidArgument("urls: required (one URL or a list of URLs)")
    spec = spec_from_arguments(arguments, other_keys=JOB_KEYS)
    if not _job.uses_kubernetes(arguments):
        return _Parsed(spec, None)
    return _Parsed(
        spec, _job.settings_from(arguments.get("kubernetes"), arguments.get("replicas", 1))
    )


@fault_action(rollback="stop_http_load")
@validated_by(_check)
@needs_k8s(*_job.RULES, when=_job.uses_kubernetes)
def drive_http_load(
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
    *,
    parsed: _Parsed = PARSED,
) -> dict[str, Any]:
    """Send open-loop HTTP load (constant rate, ramp or steps) to the named URLs.

    Requests leave at the profile's arrival times whatever the server does;
    latency is measured from the scheduled time (no coordinated omission). At
    most ``concurrency_limit`` requests are in flight (one per connection); an
    arrival that finds them all busy waits for one (the wait counts in its
    latency) and is counted as ``dropped`` after ``timeout_seconds``.
    ``duration_seconds`` 0 means 30 s for a constant rate, the ramp's
    ``over_seconds`` for a ramp ``{"from": 10, "to": 200, "over_seconds": 60}``,
    the steps' total for steps ``[{"rate": 10, "for_seconds": 20}, ...]``.
    Above 500 req/s or 600 s the load is refused unless ``max_rate`` /
    ``max_duration_seconds`` are set to cover it. ``http2`` true speaks
    HTTP/2 only (h2c prior knowledge on http://).

    Blast radius: only ``urls`` (redirects are not followed), at most the
    profile's rate for its duration. Runs in a helper process recorded in the
    ledger, so it returns at once and keeps going while the next activities
    inject faults (``wait`` true blocks until done and returns the results).
    Pair it with the ``stop_http_load`` rollback, which returns the per-second
    results; ``load_window_stats`` judges a window. Returns ``ledger_id``
    (also what ``stop_http_load`` and ``load_window_stats`` take), the
    schedule and where the results are kept. ``metrics_port`` (-1 for a
    free port) serves Prometheus metrics of the load on ``metrics_addr``.
    https certificates are verified (``ca_file``: a PEM bundle to trust).
    ``cause_header`` (a response header name, e.g. ``X-Error-Cause``): the
    value it carries on each 5xx response is counted per bucket under
    ``causes`` (why the server failed: ``error_onset`` classifies them).

    ``replicas`` > 1 (with ``kubernetes``: ``namespace``, ``pushgateway`` the
    pods push their per-second results to, optional ``image``, ``start_delay_seconds``,
    ``cpu``, ``memory``, ``service_account``, ``node_selector``) runs the same
    load from a Kubernetes Indexed Job of that many pods, each taking a 1/N
    share of the schedule from a common start; ``stop_http_load`` and
    ``load_window_stats`` merge every pod's results. The ledger owns the Job:
    the undo deletes it with foreground propagation. Needs create/get/delete
    on jobs and create/delete on secrets in that namespace.
    """
    spec = parsed.spec  # checked and parsed once, by @validated_by
    if parsed.job is not None:
        return _drive_job(spec, parsed.job, replicas, wait=wait, secrets=secrets)
    entry, load = _recorded.start_recorded(spec, module=__name__)
    started = {
        LEDGER_ID: entry.id,
        "name": name,
        "results_dir": str(load.results_dir),
        "start": load.start,
        "end": load.end,
        "processes": load.processes,
        "metrics_port": load.metrics_port,
        "peak_rate": spec.peak_rate,
        "duration_seconds": spec.duration,
        "expected_requests": spec.total_requests,
    }
    if not wait:
        return started
    return {**started, "results": _recorded.finish(entry, load, spec)}


def _drive_job(
    spec: LoadSpec, settings: _job.JobSettings, replicas: int, *, wait: bool, secrets: Secrets
) -> dict[str, Any]:
    entry, meta = _distributed.start_job_load(spec, replicas, settings, secrets, __name__)
    started = {
        LEDGER_ID: entry.id,
        "name": spec.name,
        "results_dir": meta["results_dir"],
        "start": meta["start"],
        "end": meta["end"],
        "processes": meta["processes"],
        "replicas": replicas,
        "job": f"{settings.namespace}/{meta['job']}",
        "image": settings.image,
        "peak_rate": spec.peak_rate,
        "duration_seconds": spec.duration,
        "expected_requests": spec.total_requests,
    }
    if not wait:
        return started
    _distributed.wait_done(entry, max(0.0, meta["end"] - time.time()) + 2 * spec.timeout + 60)
    stopped = stop_http_load(ledger_id=entry.id)
    return {**started, "results": stopped["results"][entry.id]}


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


@rollback_activity
@validated_by()
def stop_http_load(
    name: str = "",
    ledger_id: str = "",
    include_buckets: bool = True,
    include_dead_runs: bool = False,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Stop this run's background HTTP loads and return their per-second results (a rollback).

    The loads are those ``drive_http_load`` started in this run with that
    ``name`` or ``ledger_id`` (both empty: all of them). Blast radius: only
    this run's loads are stopped (``include_dead_runs``: also loads left by
    runs whose runner is dead); another live run's load is never stopped
    (listed under ``left_alone``), only its results are read when it is
    named. Idempotent: a load that has already finished just has its results
    returned. Raises RollbackFailed if a load could not be stopped. Returns
    ``undone``, ``faults``, ``left_alone`` and ``results``: per ``ledger_id``,
    the load's totals, error ratio, percentiles and (``include_buckets``) its
    per-second buckets, or ``results_error`` when they cannot be read.
    """
    book = default_ledger()
    named = bool(name or ledger_id)
    found = [
        e
        for e in book.history(limit=1000)
        if e.kind == KIND
        and (not ledger_id or e.id == ledger_id)
        and (not name or e.recipe.get("name") == name)
        and (e.state == "open" or e.run_id == current_run_id() or named)
    ]
    result = roll_back(
        [e for e in found if e.state == "open"], book, include_dead_runs=include_dead_runs
    )
    alone = {a[LEDGER_ID] for a in result["left_alone"]}
    result["results"] = {
        e.id: _results_of(e, include_buckets, collect=e.id not in alone)
        for e in found
        if e.id not in alone or named
    }
    return result


def _results_of(entry: Entry, include_buckets: bool, *, collect: bool) -> dict[str, Any]:
    """A load's results summary (pods' results gathered first for a stopped Job)."""
    try:
        if collect and entry.recipe.get("mode") == "kubernetes":
            _collect_pods(entry)
        return load_results(
            Path(entry.recipe.get("results_dir", "")), include_buckets=include_buckets
        )
    except LoadError as exc:
        return {"results_error": str(exc)}


def _collect_pods(entry: Entry) -> None:
    """The pods' results, kept locally; then the Pushgateway forgets them (once)."""
    _distributed.finalize(entry)
    recipe = default_ledger().get(entry.id)
    if recipe is not None and not recipe.recipe.get("forgotten"):
        _push.forget_load(entry.recipe["kubernetes"]["pushgateway_read"], entry.id)
        default_ledger().update_recipe(entry.id, {**recipe.recipe, "forgotten": True})
