"""Fault windows on dashboards: a real Prometheus scrapes a real Pushgateway (Debian's)
that `gameday run` publishes to; the windows it sees match the ledger's times."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.harness import cli_env, gameday_argv, wait_for
from support.promquery import raw_query
from support.servers import monitoring
from support.servers.monitoring import Daemon

from chaos_ext._core.ledger import Ledger
from chaos_ext._products.sandbox.servers import prometheus
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer, free_port

SCRAPE_S = 1.0
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pushgateway() -> Iterator[Daemon]:
    with monitoring.start_pushgateway() as pg:
        yield pg


@pytest.fixture(scope="module")
def prom_pg(pushgateway: Daemon) -> Iterator[PrometheusServer]:
    jobs = {"pushgateway": [pushgateway.target]}
    with prometheus.start(jobs=jobs, honor_labels=["pushgateway"], scrape_interval="1s") as server:
        server.wait_scraped(timeout=30)
        yield server


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _experiment(tmp: Path, port: int, hold_s: float, url: str) -> Path:
    experiment = {
        "title": "fault window",
        "description": "holds a port for a while",
        "extensions": [{"name": "gameday", "pushgateway_url": url}],
        "method": [
            {
                "type": "action",
                "name": "hold-a-port",
                "provider": {
                    "type": "python",
                    "module": "support.faultkit",
                    "func": "hold_port",
                    "arguments": {"port": port, "seconds": 120},
                },
            },
            {
                "type": "probe",
                "name": "wait",
                "provider": {
                    "type": "process",
                    "path": "sleep",
                    "arguments": str(hold_s),
                    "timeout": 60,
                },
            },
        ],
    }
    path = tmp / "experiment.json"
    path.write_text(json.dumps(experiment))
    return path


def _groups(pg: Daemon) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = pg.request("GET", "/api/v1/metrics")["data"]
    return [g for g in groups if g["labels"].get("job") == "gameday"]


def test_prometheus_sees_the_fault_window_within_one_scrape_of_the_ledger(
    ledger_path: Path,
    tmp_path: Path,
    pushgateway: Daemon,
    prom_pg: PrometheusServer,
) -> None:
    port = free_port()
    experiment = _experiment(tmp_path, port, 6, pushgateway.url)
    journal_path = tmp_path / "journal.json"
    result = subprocess.run(
        gameday_argv("run", "--journal", str(journal_path), str(experiment)),
        env=cli_env(ledger_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    journal = json.loads(journal_path.read_text())
    run_id = journal["gameday"]["run_id"]
    (fault,) = [e for e in journal["gameday"]["ledger"] if e["kind"] == "test-port"]
    (window,) = [e for e in journal["gameday"]["ledger"] if e["kind"] == "fault-window"]
    assert window["state"] == "closed" and "deleted the Pushgateway group" in window["note"]
    assert _groups(pushgateway) == []  # deleted at the run's end
    time.sleep(3 * SCRAPE_S)  # the last scrape ingested, with a busy machine's delay
    selector = f'gameday_fault_active{{run_id="{run_id}",fault="test-port"}}[10m]'
    (series,) = raw_query(prom_pg, selector)["result"]
    assert series["metric"]["experiment"] == "fault window"
    assert series["metric"]["target"] == f"127.0.0.1:{port}"
    active = [float(t) for t, v in series["values"] if float(v) == 1]
    assert active, series
    start_delay = active[0] - fault["created_at"]
    end_gap = fault["closed_at"] - active[-1]
    print(f"window start +{start_delay:.3f} s, last active sample {end_gap:.3f} s before undo")  # noqa: T201
    # one scrape interval, plus as much again for a scrape or a push delayed on a busy 2-core
    # machine (one scrape + 0.5 s failed once with two test lanes and the VM lane running)
    assert 0 <= start_delay <= 2 * SCRAPE_S + 0.5
    assert 0 <= end_gap <= 2 * SCRAPE_S + 0.5
    zeros = [float(t) for t, v in series["values"] if float(v) == 0]
    assert all(t >= fault["closed_at"] for t in zeros)
    (info,) = raw_query(prom_pg, f'gameday_run_info{{run_id="{run_id}"}}[10m]')["result"]
    assert info["metric"]["experiment"] == "fault window"


@pytest.mark.undoes("fault-window")
def test_gameday_rollback_after_sigkill_removes_the_group(
    ledger_path: Path,
    tmp_path: Path,
    pushgateway: Daemon,
    gameday: Any,
) -> None:
    port = free_port()
    experiment = _experiment(tmp_path, port, 60, pushgateway.url)
    proc = subprocess.Popen(
        gameday_argv("run", str(experiment)),
        env=cli_env(ledger_path),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: _port_open(port), 60, "the fault injected")
        wait_for(
            lambda: any(
                "gameday_fault_active" in g
                and g["gameday_fault_active"]["metrics"][0]["value"] == "1"
                for g in _groups(pushgateway)
            ),
            30,
            "the window published",
        )
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert len(_groups(pushgateway)) == 1  # the crash left the window open
    rollback = gameday("rollback")
    assert rollback.returncode == 0, rollback.stdout + rollback.stderr
    assert "deleted the Pushgateway group" in rollback.stdout + rollback.stderr
    assert _groups(pushgateway) == []
    assert not _port_open(port) and Ledger(ledger_path).open_entries() == []
