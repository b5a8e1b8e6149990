"""Per-second load results through a Prometheus Pushgateway: what pods publish, what readers merge.

A load run as a Kubernetes Job has no shared disk: each pod (a *shard*)
publishes every bucket line its workers write (see :mod:`.results`) to the
Pushgateway, one group per line::

    /metrics/job/gameday_load/load/<load id>/shard/<j>/worker/<w>/bucket/<i>

    gameday_load_bucket_requests{kind="sent"|"dropped"|"ok"|"answered"}
    gameday_load_bucket_errors{kind="connect"|"dns"|"timeout"|...}
    gameday_load_bucket_status{class="2xx"|...}
    gameday_load_bucket_start_time_seconds, gameday_load_bucket_length_seconds,
    gameday_load_bucket_max_lag_seconds, gameday_load_bucket_last_done_seconds
    gameday_load_bucket_latency_hdr{which="scheduled"|"service", hdr="<HdrHistogram>"} 1

The HdrHistogram travels in its own compressed encoding (a label value, a
few hundred bytes), so readers merge histograms, never percentiles. Each
shard also publishes its state (``/load/<id>/shard/<j>``: start, end, status,
errors). Prometheus scraping the Pushgateway (``honor_labels: true``) shows
the per-second counts per pod; :func:`read_lines` gets the exact lines back
from the Pushgateway's ``/api/v1/metrics`` for
:func:`chaos_ext.load.results.merge_lines`.

Pushing uses prometheus_client's ``push_to_gateway`` (PUT: a group is
replaced whole); reading uses httpx. Every call has a timeout.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, Gauge, delete_from_gateway, push_to_gateway

from chaos_ext.load.errors import LoadError
from chaos_ext.load.results import ERROR_KINDS

__all__ = [
    "JOB",
    "TIMEOUT",
    "forget_load",
    "line_from_group",
    "push_line",
    "push_shard_state",
    "read_load",
    "registry_of_line",
]

JOB = "gameday_load"
TIMEOUT = 10.0
_COUNTS = ("sent", "dropped", "ok", "answered")
_PREFIX = "gameday_load_bucket_"


def registry_of_line(line: Mapping[str, Any]) -> CollectorRegistry:
    """One bucket line as gauges (pure: nothing is sent)."""
    reg = CollectorRegistry()
    requests = Gauge(f"{_PREFIX}requests", "requests of the bucket by kind", ["kind"], registry=reg)
    for kind in _COUNTS:
        requests.labels(kind).set(line.get(kind, 0))
    errors = Gauge(
        f"{_PREFIX}errors", "failed requests of the bucket by kind", ["kind"], registry=reg
    )
    for kind, count in line.get("errors", {}).items():
        errors.labels(kind).set(count)
    status = Gauge(f"{_PREFIX}status", "answers by status class", ["class"], registry=reg)
    for klass, count in line.get("status", {}).items():
        status.labels(klass).set(count)
    scalars = {
        "start_time_seconds": line["t"],
        "length_seconds": line["s"],
        "max_lag_seconds": line.get("max_lag_ms", 0.0) / 1000,
        "last_done_seconds": line.get("last_done_seconds", 0.0),
    }
    for name, value in scalars.items():
        Gauge(f"{_PREFIX}{name}", name.replace("_", " "), registry=reg).set(value)
    hdr = Gauge(
        f"{_PREFIX}latency_hdr",
        "the bucket's HdrHistogram (compressed, base64)",
        ["which", "hdr"],
        registry=reg,
    )
    for which, key in (("scheduled", "hist"), ("service", "svc")):
        if line.get(key):
            hdr.labels(which, line[key]).set(1)
    return reg


def _grouping(load_id: str, shard: int, line: Mapping[str, Any]) -> dict[str, str]:
    return {
        "load": load_id,
        "shard": str(shard),
        "worker": str(line["w"]),
        "bucket": str(line["i"]),
    }


def push_line(url: str, load_id: str, shard: int, line: Mapping[str, Any]) -> None:
    """Publish one bucket line of shard ``shard`` (LoadError if the Pushgateway refuses)."""
    try:
        push_to_gateway(
            url,
            job=JOB,
            registry=registry_of_line(line),
            grouping_key=_grouping(load_id, shard, line),
            timeout=TIMEOUT,
        )
    except OSError as exc:
        raise LoadError(f"cannot push load results to {url}: {exc}") from exc


def push_shard_state(url: str, load_id: str, shard: int, state: Mapping[str, Any]) -> None:
    """Publish a shard's state: ``start``, ``end``, ``status``, ``processes``, ``errors``."""
    reg = CollectorRegistry()
    info = Gauge(
        "gameday_load_shard_info", "a load shard's status", ["status", "errors"], registry=reg
    )
    info.labels(str(state["status"]), json.dumps(state.get("errors") or [])[:2000]).set(1)
    for name in ("start", "end", "processes", "ended_at"):
        Gauge(f"gameday_load_shard_{name}", name, registry=reg).set(float(state.get(name) or 0))
    grouping = {"load": load_id, "shard": str(shard)}
    try:
        push_to_gateway(url, job=JOB, registry=reg, grouping_key=grouping, timeout=TIMEOUT)
    except OSError as exc:
        raise LoadError(f"cannot push the state of load shard {shard} to {url}: {exc}") from exc


def _value(family: Mapping[str, Any] | None, **labels: str) -> float | None:
    for metric in (family or {}).get("metrics", []):
        if all(metric.get("labels", {}).get(k) == v for k, v in labels.items()):
            return float(metric["value"])
    return None


def _labelled(family: Mapping[str, Any] | None, label: str) -> dict[str, int]:
    found = {}
    for metric in (family or {}).get("metrics", []):
        key = metric.get("labels", {}).get(label)
        if key is not None:
            found[key] = int(float(metric["value"]))
    return found


def line_from_group(group: Mapping[str, Any]) -> dict[str, Any]:
    """A bucket line back from its Pushgateway group (the ``/api/v1/metrics`` JSON)."""
    labels = group["labels"]
    requests = group.get(f"{_PREFIX}requests")
    hdr = {
        m["labels"]["which"]: m["labels"]["hdr"]
        for m in (group.get(f"{_PREFIX}latency_hdr") or {}).get("metrics", [])
    }
    errors = _labelled(group.get(f"{_PREFIX}errors"), "kind")
    return {
        "i": int(labels["bucket"]),
        "w": int(labels["worker"]),
        "shard": int(labels["shard"]),
        "t": _value(group.get(f"{_PREFIX}start_time_seconds")),
        "s": _value(group.get(f"{_PREFIX}length_seconds")),
        **{kind: int(_value(requests, kind=kind) or 0) for kind in _COUNTS},
        "errors": {k: n for k, n in errors.items() if k in ERROR_KINDS or n},
        "status": _labelled(group.get(f"{_PREFIX}status"), "class"),
        "max_lag_ms": 1000 * (_value(group.get(f"{_PREFIX}max_lag_seconds")) or 0.0),
        "last_done_seconds": _value(group.get(f"{_PREFIX}last_done_seconds")) or 0.0,
        "hist": hdr.get("scheduled", ""),
        "svc": hdr.get("service", ""),
    }


def _state_from_group(group: Mapping[str, Any]) -> dict[str, Any]:
    info = (group.get("gameday_load_shard_info") or {}).get("metrics", [{}])[0].get("labels", {})
    state: dict[str, Any] = {
        "shard": int(group["labels"]["shard"]),
        "status": info.get("status", "unknown"),
        "errors": json.loads(info.get("errors") or "[]"),
    }
    for key in ("start", "end", "processes", "ended_at"):
        state[key] = _value(group.get(f"gameday_load_shard_{key}"))
    return state


def _groups(url: str, load_id: str) -> list[dict[str, Any]]:
    try:
        answer = httpx.get(f"{url.rstrip('/')}/api/v1/metrics", timeout=TIMEOUT)
        answer.raise_for_status()
        data = answer.json().get("data") or []
    except (httpx.HTTPError, ValueError) as exc:
        raise LoadError(f"cannot read load results from the Pushgateway {url}: {exc}") from exc
    return [
        g
        for g in data
        if g.get("labels", {}).get("job") == JOB and g.get("labels", {}).get("load") == load_id
    ]


def read_load(url: str, load_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(bucket lines, shard states)`` of a load, as published so far."""
    groups = _groups(url, load_id)
    lines = [line_from_group(g) for g in groups if "bucket" in g["labels"]]
    states = [_state_from_group(g) for g in groups if "bucket" not in g["labels"]]
    return lines, sorted(states, key=lambda s: int(s["shard"]))


def forget_load(url: str, load_id: str, groups: Iterable[Mapping[str, str]] | None = None) -> int:
    """Delete a load's groups from the Pushgateway (after its results were kept); how many."""
    keys = (
        list(groups)
        if groups is not None
        else [{k: v for k, v in g["labels"].items() if k != "job"} for g in _groups(url, load_id)]
    )
    for key in keys:
        try:
            delete_from_gateway(url, job=JOB, grouping_key=dict(key), timeout=TIMEOUT)
        except OSError as exc:
            raise LoadError(f"cannot delete load results from {url}: {exc}") from exc
    return len(keys)
