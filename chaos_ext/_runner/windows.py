"""Fault windows on the team's dashboards: the run's faults published to a Pushgateway.

While a run is active, gameday pushes to the Pushgateway (group ``job="gameday",
run_id=<run>``)::

    gameday_fault_active{experiment, fault, target, run_id}   1 while injected, 0 once undone
    gameday_run_info{experiment, run_id, version}             1 while the run is active

The group is deleted when the run ends. The publication is itself recorded in
the fault ledger (kind ``fault-window``) *before* the first push, so the
ledger sweep deletes the group too: after a crash, ``gameday rollback`` (or the
next ``gameday run``) removes it. Where the Pushgateway is, in order:

1. the configuration value ``pushgateway_url`` (``--var pushgateway_url=...``);
2. ``"extensions": [{"name": "gameday", "pushgateway_url": "..."}]`` in the experiment;
3. the environment variable ``GAMEDAY_PUSHGATEWAY_URL``;
4. Chaos Toolkit's settings file: ``gameday: {pushgateway_url: ...}``.

Without any of them nothing is published. A push that fails is logged and the
run goes on (a dashboard is not a safety control); a group that cannot be
deleted keeps its ledger entry open, so ``gameday rollback`` retries it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

from chaoslib.settings import get_loaded_settings
from prometheus_client import CollectorRegistry, Gauge, delete_from_gateway, push_to_gateway

from chaos_ext import __version__
from chaos_ext._core.ledger import Entry, add_listener, remove_listener
from chaos_ext._core.ledger import record as record_fault
from chaos_ext.errors import InvalidArgument

__all__ = ["ENV", "KIND", "FaultWindows", "pushgateway_url"]

ENV = "GAMEDAY_PUSHGATEWAY_URL"
KIND = "fault-window"
JOB = "gameday"
TIMEOUT_S = 5.0

logger = logging.getLogger("chaostoolkit")


def pushgateway_url(config_vars: Mapping[str, Any], experiment: Mapping[str, Any]) -> str | None:
    """The Pushgateway to publish to, or None (see the module docstring for the order)."""
    configured = config_vars.get("pushgateway_url") or (experiment.get("configuration") or {}).get(
        "pushgateway_url"
    )
    found: Any = configured if isinstance(configured, str) else None
    for extension in experiment.get("extensions") or []:
        if found is None and isinstance(extension, Mapping) and extension.get("name") == "gameday":
            found = extension.get("pushgateway_url")
    found = found or os.environ.get(ENV)
    if not found:
        settings = (get_loaded_settings() or {}).get("gameday") or {}
        found = settings.get("pushgateway_url") if isinstance(settings, Mapping) else None
    if not found:
        return None
    url = str(found).strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise InvalidArgument(f"pushgateway_url={url!r} is not an http(s) URL")
    return url


def _grouping(run_id: str) -> dict[str, str]:
    return {"run_id": run_id}


class FaultWindows:
    """Follows the ledger of one run and keeps its Pushgateway group up to date."""

    def __init__(self, url: str, run_id: str, experiment: str) -> None:
        self.url, self.run_id, self.experiment = url, run_id, experiment
        self.registry = CollectorRegistry()
        self._active = Gauge(
            "gameday_fault_active",
            "1 while a gameday fault is injected, 0 once undone",
            ["experiment", "fault", "target"],
            registry=self.registry,
        )
        info = Gauge(
            "gameday_run_info",
            "1 while a gameday run is active",
            ["experiment", "version"],
            registry=self.registry,
        )
        info.labels(experiment, __version__).set(1)
        self._entries: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()
        self.pushes = 0
        self.failures: list[str] = []

    def start(self) -> None:
        """Record the publication in the ledger, then publish the run (no fault yet)."""
        record_fault(
            kind=KIND,
            target=f"{self.url} run_id={self.run_id}",
            recipe={"url": self.url, "run_id": self.run_id},
            module=__name__,
        )
        add_listener(self._on_ledger)
        self._push()

    def stop(self) -> None:
        remove_listener(self._on_ledger)

    def _on_ledger(self, event: str, entry: Entry) -> None:
        if entry.run_id != self.run_id or entry.kind == KIND:
            return
        with self._lock:
            if event == "open":
                self._entries[entry.id] = (entry.kind, entry.target)
                self._active.labels(self.experiment, entry.kind, entry.target).set(1)
            elif event == "closed" and entry.id in self._entries:
                kind, target = self._entries[entry.id]
                self._active.labels(self.experiment, kind, target).set(0)
            else:
                return
        self._push()

    def _push(self) -> None:
        try:
            with self._lock:
                push_to_gateway(
                    self.url,
                    job=JOB,
                    registry=self.registry,
                    grouping_key=_grouping(self.run_id),
                    timeout=TIMEOUT_S,
                )
            self.pushes += 1
        except OSError as exc:  # URLError and socket errors: log, the run goes on
            self.failures.append(str(exc))
            logger.warning("fault windows: cannot push to %s: %s", self.url, exc)

    def record(self) -> dict[str, Any]:
        return {
            "pushgateway": self.url,
            "group": {"job": JOB, **_grouping(self.run_id)},
            "pushes": self.pushes,
            "failures": self.failures[:5],
        }


def delete_group(entry: Entry) -> str:
    """Delete the run's group (idempotent: deleting a missing group succeeds)."""
    url, run_id = entry.recipe["url"], entry.recipe["run_id"]
    delete_from_gateway(url, job=JOB, grouping_key=_grouping(run_id), timeout=TIMEOUT_S)
    return f"deleted the Pushgateway group job={JOB} run_id={run_id}"
