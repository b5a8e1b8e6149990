"""One pod of a load run as a Kubernetes Indexed Job: runs its shard, publishes to the Pushgateway.

``python -m chaos_ext.load._pod`` (the Job's container command, in the image
``gameday schedule`` describes). Configuration comes from the environment:

* ``GAMEDAY_LOAD_SPEC``: the load's spec (JSON, from the Job's Secret:
  headers and body stay out of the Job object);
* ``JOB_COMPLETION_INDEX`` (set by Kubernetes) and ``GAMEDAY_LOAD_SHARDS``:
  this pod is shard ``index`` of ``shards`` and takes arrivals
  ``index, index + shards, ...`` of the one rate schedule (a 1/N share);
* ``GAMEDAY_LOAD_ID``, ``GAMEDAY_PUSHGATEWAY``: where its results go.

All shards start at the spec's ``start_at`` (unix time), so their buckets
line up; a pod that starts late counts the arrivals it missed as dropped.
The pod runs the same coordinator and workers as a local load (on its own
emptyDir) and a publisher thread pushes every bucket line as soon as a worker
writes it, then the shard's final state. SIGTERM (the Job deleted) stops it.
Exit code 0 when the shard completed, 1 otherwise.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chaos_ext.errors import ChaosExtError
from chaos_ext.load import _coordinator, _push
from chaos_ext.load.errors import LoadError

__all__ = ["Publisher", "main", "run_shard"]

ENV_SPEC = "GAMEDAY_LOAD_SPEC"
ENV_LOAD = "GAMEDAY_LOAD_ID"
ENV_PUSHGATEWAY = "GAMEDAY_PUSHGATEWAY"
ENV_SHARDS = "GAMEDAY_LOAD_SHARDS"
ENV_INDEX = "JOB_COMPLETION_INDEX"
_PUBLISH_EVERY = 0.5


class Publisher(threading.Thread):
    """Pushes each complete line the workers append to ``worker-*.jsonl``, once, in order."""

    def __init__(self, results: Path, url: str, load_id: str, shard: int) -> None:
        super().__init__(name="gameday-load-publisher", daemon=True)
        self.results, self.url, self.load_id, self.shard = results, url, load_id, shard
        self.offsets: dict[Path, int] = {}
        self.pending: list[dict[str, Any]] = []
        self.pushed = 0
        self.last_error = ""
        self.done = threading.Event()

    def _collect(self) -> None:
        for path in sorted(self.results.glob("worker-*.jsonl")):
            with path.open("rb") as handle:
                handle.seek(self.offsets.get(path, 0))
                chunk = handle.read()
            complete = chunk[: chunk.rfind(b"\n") + 1]
            self.offsets[path] = self.offsets.get(path, 0) + len(complete)
            self.pending += [json.loads(raw) for raw in complete.splitlines() if raw.strip()]

    def publish(self) -> None:
        """Collect new lines and push what is pending (kept for a retry if the push fails)."""
        self._collect()
        while self.pending:
            try:
                _push.push_line(self.url, self.load_id, self.shard, self.pending[0])
            except LoadError as exc:
                self.last_error = str(exc)
                return
            self.pending.pop(0)
            self.pushed += 1

    def run(self) -> None:
        while not self.done.wait(_PUBLISH_EVERY):
            self.publish()

    def finish(self, attempts: int = 5) -> None:
        """Stop the loop and push everything left (a few attempts)."""
        self.done.set()
        self.join(timeout=_push.TIMEOUT * 2)
        for attempt in range(attempts):
            self.publish()
            if not self.pending:
                return
            time.sleep(min(2.0, 0.2 * 2**attempt))
        raise LoadError(f"{len(self.pending)} result lines not pushed: {self.last_error}")


def _env(environ: Mapping[str, str], name: str) -> str:
    value = environ.get(name, "")
    if not value:
        raise LoadError(f"{name} is not set: this runs as a pod of a gameday load Job")
    return value


def run_shard(environ: Mapping[str, str], stop: threading.Event) -> str:
    """Run this pod's shard to its end; returns the final status."""
    payload = json.loads(_env(environ, ENV_SPEC))
    shards, index = int(_env(environ, ENV_SHARDS)), int(_env(environ, ENV_INDEX))
    if not 0 <= index < shards:
        raise LoadError(f"{ENV_INDEX}={index} is outside 0..{shards - 1}")
    load_id, url = _env(environ, ENV_LOAD), _env(environ, ENV_PUSHGATEWAY)
    payload.update(shard_index=index, shard_count=shards)
    results = Path(tempfile.mkdtemp(prefix=f"gameday-load-{index}-"))
    publisher = Publisher(results, url, load_id, index)
    state: dict[str, Any] = {"status": "starting", "start": payload.get("start_at", 0)}

    def ready(info: dict[str, Any]) -> None:
        state.update(
            status="running", start=info["start"], end=info["end"], processes=info["processes"]
        )
        try:
            _push.push_shard_state(url, load_id, index, state)
        except LoadError as exc:  # the load goes on; the final state is pushed again at the end
            publisher.last_error = str(exc)

    publisher.start()
    try:
        _coordinator.work(
            {"spec": payload, "results_dir": str(results), "label": load_id}, ready, stop
        )
        done = json.loads((results / "done.json").read_text())
        state.update(status=done["status"], errors=done["errors"], ended_at=done["ended_at"])
    except (ChaosExtError, OSError, ValueError) as exc:
        state.update(status="failed", errors=[f"{type(exc).__name__}: {exc}"], ended_at=time.time())
    try:
        publisher.finish()
    except LoadError as exc:
        state.update(status="failed", errors=[*state.get("errors", []), str(exc)])
    _push.push_shard_state(url, load_id, index, state)
    return str(state["status"])


def main() -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        status = run_shard(os.environ, stop)
    except (ChaosExtError, ValueError) as exc:
        print(f"gameday load shard: {exc}", file=sys.stderr)  # noqa: T201 - the pod's log
        return 2
    print(f"gameday load shard: {status}", file=sys.stderr)  # noqa: T201 - the pod's log
    return 0 if status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
