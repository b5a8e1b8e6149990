"""Python API of the load driver (used by the activities and by the sandbox).

::

    from chaos_ext.load.driver import background_load, load_results
    from chaos_ext.load.spec import spec_from_arguments

    spec = spec_from_arguments(
        {"urls": ["http://127.0.0.1:8080/"], "rate": 50, "duration_seconds": 60}
    )
    with background_load(spec, results_dir=Path("out/load")) as load:
        ...  # inject faults meanwhile
    print(load_results(load.results_dir)["p99_ms"])

A load runs in a helper process tagged with ``token`` (see
:mod:`chaos_ext._core.helper`): :func:`stop_load` with the same token stops it
from any process. Results are read from ``results_dir`` at any time, while
the load runs or after.
"""

from __future__ import annotations

import json
import ssl
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos_ext._core import helper as _helper
from chaos_ext.errors import ChaosExtError, InvalidArgument
from chaos_ext.load.errors import LoadError
from chaos_ext.load.results import read_buckets, summarize
from chaos_ext.load.spec import LoadSpec

__all__ = [
    "RunningLoad",
    "background_load",
    "check_ca_file",
    "load_is_running",
    "load_meta",
    "load_results",
    "start_load",
    "stop_load",
    "wait_load",
]

HELPER_MODULE = "chaos_ext.load._coordinator"


@dataclass(frozen=True)
class RunningLoad:
    """A started load: its helper token, where its results go, and its time span."""

    token: str
    results_dir: Path
    pid: int
    start: float
    end: float
    processes: int
    metrics_port: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "token": self.token,
            "results_dir": str(self.results_dir),
            "pid": self.pid,
            "start": self.start,
            "end": self.end,
            "processes": self.processes,
            "metrics_port": self.metrics_port,
        }


def start_load(
    spec: LoadSpec, *, results_dir: Path, token: str | None = None, ready_timeout: float = 20.0
) -> RunningLoad:
    """Start ``spec`` in the background; return once its workers are forked."""
    token = token or f"load-{uuid.uuid4().hex[:12]}"
    if spec.ca_file and not Path(spec.ca_file).is_file():
        raise InvalidArgument(f"ca_file: {spec.ca_file!r} is not a readable file")
    results_dir.mkdir(parents=True, exist_ok=True)
    payload = {
        "spec": spec.to_payload(),
        "results_dir": str(results_dir),
        "label": spec.name or token,
    }
    try:
        handle = _helper.start_helper(
            module=HELPER_MODULE, payload=payload, token=token, ready_timeout=ready_timeout
        )
    except ChaosExtError as exc:
        raise LoadError(f"the load helper did not start: {exc}") from exc
    ready = handle.ready
    return RunningLoad(
        token=token,
        results_dir=results_dir,
        pid=handle.pid,
        start=float(ready["start"]),
        end=float(ready["end"]),
        processes=int(ready["processes"]),
        metrics_port=int(ready["metrics_port"]),
    )


def check_ca_file(spec: LoadSpec) -> None:
    """``ca_file`` must be a PEM bundle Python's ssl can load (InvalidArgument otherwise).

    Checked before anything is recorded or started: a bundle the load helper
    cannot load would only fail once the helper runs.
    """
    if not spec.ca_file:
        return
    if not Path(spec.ca_file).is_file():
        raise InvalidArgument(f"ca_file: {spec.ca_file!r} is not a readable file")
    try:
        ssl.create_default_context(cafile=spec.ca_file)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise InvalidArgument(
            f"ca_file: {spec.ca_file!r} is not a PEM certificate bundle ({exc})"
        ) from exc


def stop_load(token: str) -> int:
    """Stop every process of the load ``token`` (SIGTERM, then SIGKILL); how many there were."""
    return _helper.stop_helpers(token)


def load_is_running(token: str) -> bool:
    """Whether any process of the load ``token`` is still alive."""
    return bool(_helper.find_helpers(token))


def wait_load(token: str, *, timeout: float, results_dir: Path | None = None) -> bool:
    """Wait until the load ``token`` has ended by itself; False on timeout.

    With ``results_dir``, the load has ended when its ``done.json`` is written
    (its /metrics endpoint may still be up for a while).
    """
    deadline = time.monotonic() + timeout

    def ended() -> bool:
        if results_dir is not None and (results_dir / "done.json").exists():
            return True
        return not load_is_running(token)

    while time.monotonic() < deadline:
        if ended():
            return True
        time.sleep(0.1)
    return ended()


def load_meta(results_dir: Path) -> dict[str, Any]:
    """``meta.json`` (what and when) merged with ``done.json`` (how it ended) if present."""
    try:
        meta: dict[str, Any] = json.loads((results_dir / "meta.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise LoadError(f"no load results in {results_dir}: {exc}") from exc
    done = results_dir / "done.json"
    meta["status"] = "running"
    if done.exists():
        meta.update(json.loads(done.read_text()))
    return meta


def load_results(
    results_dir: Path,
    *,
    start: float | None = None,
    end: float | None = None,
    include_buckets: bool = True,
) -> dict[str, Any]:
    """Summary of the buckets whose middle falls in ``[start, end)`` (unix times; all if None)."""
    meta = load_meta(results_dir)
    buckets = [
        b
        for b in read_buckets(results_dir)
        if (start is None or b.start + b.seconds / 2 >= start)
        and (end is None or b.start + b.seconds / 2 < end)
    ]
    summary = summarize(buckets, origin=meta["start"], include_buckets=include_buckets)
    summary["window"] = {
        "start": start if start is not None else meta["start"],
        "end": end if end is not None else meta.get("ended_at", meta["end"]),
    }
    summary["load"] = {
        key: meta.get(key)
        for key in ("label", "start", "end", "status", "ended_at", "processes", "errors", "spec")
    }
    return summary


@contextmanager
def background_load(
    spec: LoadSpec, *, results_dir: Path, token: str | None = None
) -> Iterator[RunningLoad]:
    """Run ``spec`` for the duration of the ``with`` block (or less); always stopped after."""
    load = start_load(spec, results_dir=results_dir, token=token)
    try:
        yield load
    finally:
        stop_load(load.token)
