"""Real journals for the reporting tests: `gameday run` on small experiments, once per module."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.gameday_cli import ROOT, run_gameday
from support.servers import http_target


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _py(name: str, module: str, func: str, kind: str = "probe", **arguments: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "name": name,
        "provider": {"type": "python", "module": module, "func": func, "arguments": arguments},
    }


def deviating_experiment(port: int) -> dict[str, Any]:
    """Holds a port open (a real listener in a helper process): 'port closed' deviates."""
    closed = _py("port-closed", "support.faultkit", "port_open", port=port)
    closed["tolerance"] = False
    latency = _py("connect-ms", "support.reportkit", "connect_ms", port=port)
    latency["tolerance"] = {"type": "range", "range": [-1, 50]}
    return {
        "title": "a held port is noticed",
        "description": "holds 127.0.0.1:port open; the hypothesis says it is closed",
        "steady-state-hypothesis": {"title": "the port stays closed", "probes": [closed, latency]},
        "method": [
            _py(
                "hold-the-port",
                "support.faultkit",
                "hold_port",
                kind="action",
                port=port,
                seconds=60,
            ),
            _py(
                "measure-connects",
                "support.reportkit",
                "connect_series",
                port=port,
                count=6,
                interval=0.1,
            ),
        ],
        "rollbacks": [
            _py("undo-this-run", "chaos_ext.faults.actions", "rollback_faults", kind="action")
        ],
    }


def load_then_fault_experiment(target_url: str, port: int) -> dict[str, Any]:
    """A baseline load (the hypothesis' own, before the method), then a load in the method,
    then a fault (a held port) 1.5 s later: the loads must never count as fault time.

    Its texts name configuration values (``${rate}``), its load probe answers a mapping
    judged on one key (``error_ratio``), and it runs for about 10 s."""
    errors = _py("load-error-ratio", "chaos_ext.load.probes", "load_window_stats")
    errors["provider"]["arguments"] = {
        "name": "bg-load",
        "baseline_urls": ["${target_url}"],
        "baseline_rate": "${rate}",
        "baseline_seconds": 1,
        "include_buckets": False,
    }
    errors["tolerance"] = {"type": "range", "target": "error_ratio", "range": [0.0, 0.01]}
    closed = _py("port-closed", "support.faultkit", "port_open", port=port)
    closed["tolerance"] = False
    latency = _py("connect-ms", "support.reportkit", "connect_ms", port=port)
    latency["tolerance"] = {"type": "range", "range": [-1, 50]}
    load = _py("load-at-${rate}-per-second", "chaos_ext.load.actions", "drive_http_load", "action")
    load["provider"]["arguments"] = {
        "urls": ["${target_url}"],
        "rate": "${rate}",
        "duration_seconds": 20,
        "timeout_seconds": 2,
        "name": "bg-load",
    }
    load["pauses"] = {"after": 1.5}
    hold = _py("hold-the-port", "support.faultkit", "hold_port", kind="action", port=port)
    hold["pauses"] = {"after": 1}
    return {
        "title": "Requests at ${rate}/s keep flowing while a port is held",
        "description": "a load of ${rate} requests a second, then 127.0.0.1:${port} is held open",
        "configuration": {"target_url": target_url, "rate": 20, "port": port},
        "steady-state-hypothesis": {
            "title": "under 1 % of requests fail and the port stays closed",
            "probes": [errors, closed, latency],
        },
        "method": [
            load,
            hold,
            _py("measure-connects", "support.reportkit", "connect_series", port=port, count=4),
        ],
        "rollbacks": [
            _py("undo-this-run", "chaos_ext.faults.actions", "rollback_faults", kind="action"),
            _py("stop-the-load", "chaos_ext.load.actions", "stop_http_load", "action"),
        ],
        "extensions": [{"name": "gameday", "recover_seconds": 20}],
    }


@pytest.fixture(scope="module")
def real_journals(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """A deviated run with a rollback and a held run, written by the real `gameday run`."""
    tmp = tmp_path_factory.mktemp("journals")
    ledger = tmp / "ledger.sqlite3"
    deviating = tmp / "deviating.json"
    deviating.write_text(json.dumps(deviating_experiment(free_port())))
    held = ROOT / "experiments" / "ledger-clean.json"
    journals = {
        "deviated": tmp / "journal-deviating.json",
        "held": tmp / "journal-ledger-clean.json",
    }
    try:
        out = run_gameday(
            tmp,
            ledger,
            "run",
            "--journal-dir",
            str(tmp),
            "--hypothesis-strategy",
            "continuously",
            "--hypothesis-frequency",
            "0.3",
            str(deviating),
            str(held),
        )
        assert out.returncode == 1, out.stdout + out.stderr
        assert all(p.exists() for p in journals.values())
        yield journals
    finally:  # whatever happened, leave no fault behind
        run_gameday(tmp, ledger, "rollback")


@dataclass(frozen=True)
class TimelineRun:
    """A real `gameday run` of the load-then-fault experiment: its journal and console
    (stdout and stderr)."""

    journal: Path
    stdout: str

    def load(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.journal.read_text())
        return loaded


@pytest.fixture(scope="session")
def load_then_fault(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TimelineRun]:
    """The load-then-fault experiment run once by the real `gameday run` (continuous checks
    every 0.5 s) against a real HTTP target: about 10 s."""
    tmp = tmp_path_factory.mktemp("load-then-fault")
    ledger = tmp / "ledger.sqlite3"
    path = tmp / "load-then-fault.json"
    with http_target.start() as server:
        path.write_text(json.dumps(load_then_fault_experiment(server.url, free_port())))
        try:
            out = run_gameday(
                tmp,
                ledger,
                "run",
                "--journal-dir",
                str(tmp),
                "--hypothesis-strategy",
                "continuously",
                "--hypothesis-frequency",
                "0.5",
                str(path),
            )
            assert out.returncode == 1, out.stdout + out.stderr  # deviated: the port is held
            yield TimelineRun(tmp / "journal-load-then-fault.json", out.stdout + out.stderr)
        finally:  # whatever happened, leave no fault behind
            run_gameday(tmp, ledger, "rollback")
