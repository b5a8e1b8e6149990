"""A load from many pods, end to end: ledger entry, Job, results merged from the Pushgateway.

:func:`start_job_load` records the load in the fault ledger (kind
``http-load``, recipe ``mode: kubernetes``) *before* it creates the Secret and
the Indexed Job (:mod:`._job`). :func:`sync` copies what the pods published
(:mod:`._push`) into the load's local results directory, one
``worker-s<shard>-<worker>.jsonl`` per pod worker, plus ``meta.json`` and, once
every shard has ended, ``done.json``: from there the local readers
(:func:`chaos_ext.load.driver.load_results`) merge all pods' buckets,
histogram by histogram, exactly as they merge local workers.
:func:`delete_job` is the undo: the Job with foreground propagation, then the
Secret; what is already gone is fine.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes import client

from chaos_ext._core import k8s as _k8s
from chaos_ext._core.ledger import Entry, fault, new_entry_id
from chaos_ext.errors import KubernetesError
from chaos_ext.load import _job, _locate, _push
from chaos_ext.load.spec import RATE_PER_PROCESS, LoadSpec

__all__ = [
    "delete_job",
    "deleted_note",
    "finalize",
    "shard_payload",
    "start_job_load",
    "sync",
    "wait_done",
]

_FINAL = ("completed", "stopped", "capped", "failed")


def shard_payload(spec: LoadSpec, replicas: int, start_at: float) -> dict[str, Any]:
    """The spec every pod gets: its share of connections and processes, the common start."""
    payload = spec.to_payload()
    per_pod_rate = spec.peak_rate / replicas
    payload.update(
        concurrency_limit=max(1, math.ceil(spec.concurrency_limit / replicas)),
        processes=max(1, math.ceil(per_pod_rate / RATE_PER_PROCESS)),
        start_at=start_at,
        metrics_port=0,
        shard_count=replicas,
    )
    return payload


def _context(secrets: Mapping[str, Any] | None) -> dict[str, str]:
    """Which kubeconfig context to undo in (a name, never a credential)."""
    context = (secrets or {}).get("KUBERNETES_CONTEXT")
    return {"KUBERNETES_CONTEXT": str(context)} if context else {}


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def start_job_load(
    spec: LoadSpec,
    replicas: int,
    settings: _job.JobSettings,
    secrets: Mapping[str, Any] | None,
    module: str,
) -> tuple[Entry, dict[str, Any]]:
    """Record, then create the Secret and the Job; returns the entry and the load's meta."""
    start = time.time() + settings.start_delay_seconds
    payload = shard_payload(spec, replicas, start)
    target = spec.name or _locate.describe_url(spec.urls[0])
    entry_id = new_entry_id()  # the recipe names its results folder: complete when recorded
    results = _locate.results_root() / entry_id
    recipe: dict[str, Any] = {
        "mode": "kubernetes",
        "name": spec.name,
        "replicas": replicas,
        "urls": [_locate.describe_url(u) for u in spec.urls],
        "kubernetes": settings.as_dict(),
        "context": _context(secrets),
        "start": start,
        "end": start + spec.duration,
        "results_dir": str(results),
    }
    deadline = math.ceil(settings.start_delay_seconds + spec.duration + 2 * spec.timeout + 120)
    api = _k8s.api_client(secrets)
    identity = _k8s.cluster_identity(api, secrets)
    with fault(
        kind=_locate.KIND,
        target=target,
        recipe=recipe,
        module=module,
        identity=identity,
        entry_id=entry_id,
    ) as entry:
        results.mkdir(parents=True, exist_ok=True)
        meta = {
            "start": start,
            "end": start + spec.duration,
            "label": spec.name or entry.id,
            "processes": replicas * int(payload["processes"]),
            "replicas": replicas,
            "mode": "kubernetes",
            "job": _job.job_name(entry.id),
            "namespace": settings.namespace,
            "spec": spec.public(),
        }
        _write_json(results / "meta.json", meta)
        _create(api, entry.id, settings, replicas, payload, deadline)
    return entry, {**meta, "results_dir": str(results)}


def _create(
    api: client.ApiClient,
    load_id: str,
    settings: _job.JobSettings,
    replicas: int,
    payload: Mapping[str, Any],
    deadline: int,
) -> None:
    ns, name = settings.namespace, _job.job_name(load_id)
    _k8s.call(
        client.CoreV1Api(api).create_namespaced_secret,
        ns,
        _job.secret_manifest(load_id, settings, payload),
        what=f"create Secret {ns}/{name}",
        _preload_content=False,
    )
    _k8s.call(
        client.BatchV1Api(api).create_namespaced_job,
        ns,
        _job.job_manifest(load_id, settings, replicas, deadline),
        what=f"create Job {ns}/{name}",
        _preload_content=False,
    )


def _delete(func: Any, name: str, ns: str, what: str, **kwargs: Any) -> bool:
    try:
        _k8s.call(func, name, ns, what=what, _preload_content=False, **kwargs)
    except KubernetesError as exc:
        if _k8s.status_of(exc.__cause__) == 404:
            return False
        raise
    return True


def delete_job(entry: Entry) -> str:
    """Delete the load's Job (foreground: its pods first) and its Secret; idempotent."""
    ns = entry.recipe["kubernetes"]["namespace"]
    name = _job.job_name(entry.id)
    api = _k8s.undo_api_client(entry.identity)  # the recorded cluster, or TargetMismatch
    body = client.V1DeleteOptions(propagation_policy="Foreground")
    job = _delete(
        client.BatchV1Api(api).delete_namespaced_job, name, ns, f"delete Job {ns}/{name}", body=body
    )
    secret = _delete(
        client.CoreV1Api(api).delete_namespaced_secret, name, ns, f"delete Secret {ns}/{name}"
    )
    return deleted_note(f"{ns}/{name}", job=job, secret=secret, retried=bool(entry.last_error))


def deleted_note(name: str, *, job: bool, secret: bool, retried: bool) -> str:
    """What the undo did, as it happened: ``job``/``secret`` True if deleted, False if absent.

    The Secret is created first, then the Job, and only an undo deletes
    them: an absent one was never created (the load was stopped first),
    unless an earlier undo attempt of this entry (``retried``) deleted it.
    """
    absent = "already deleted by an earlier undo attempt" if retried else "never created"
    if job:
        pods = f"deleted Job {name} (foreground: its pods first)"
        return f"{pods} and its Secret" if secret else f"{pods}; its Secret was {absent}"
    never_ran = "" if retried else ": the load was stopped before it started"
    if secret:
        return f"deleted Secret {name}; its Job was {absent}{never_ran}"
    return f"nothing to delete: Job and Secret {name} were {absent}{never_ran}"


def sync(entry: Entry) -> dict[str, Any]:
    """Copy the pods' published results into the local results dir; the shards' states."""
    results = Path(entry.recipe.get("results_dir") or _locate.results_root() / entry.id)
    url = entry.recipe["kubernetes"]["pushgateway_read"]
    lines, states = _push.read_load(url, entry.id)
    files: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for line in sorted(lines, key=lambda item: (item["shard"], item["w"], item["i"])):
        files.setdefault((line["shard"], line["w"]), []).append(line)
    for (shard, worker), found in files.items():
        text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in found)
        (results / f"worker-s{shard}-{worker}.jsonl").write_text(text)
    replicas = int(entry.recipe["replicas"])
    final = [s for s in states if s["status"] in _FINAL]
    if len(final) == replicas and not (results / "done.json").exists():
        worst = next((s for s in _FINAL[::-1] if any(f["status"] == s for f in final)), "completed")
        errors = [e for s in final for e in s.get("errors") or []]
        ended = max(float(s.get("ended_at") or 0) for s in final)
        _write_json(results / "done.json", {"status": worst, "ended_at": ended, "errors": errors})
    return {"lines": len(lines), "shards": states, "results_dir": str(results)}


def finalize(entry: Entry) -> dict[str, Any]:
    """After the Job is gone: a last sync; shards that never reported make the load failed."""
    found = sync(entry)
    results = Path(found["results_dir"])
    if not (results / "done.json").exists():
        ended = {int(s["shard"]) for s in found["shards"] if s["status"] in _FINAL}
        missing = sorted(set(range(int(entry.recipe["replicas"]))) - ended)
        errors = [f"shard {j} never reported its end (pod not started, or killed)" for j in missing]
        _write_json(
            results / "done.json", {"status": "failed", "ended_at": time.time(), "errors": errors}
        )
    return found


def wait_done(entry: Entry, timeout: float) -> bool:
    """Sync until every shard has ended (``done.json``), at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        results = Path(sync(entry)["results_dir"])
        if (results / "done.json").exists():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(1.0)
