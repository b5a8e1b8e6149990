"""docs/verdicts.md, "Stops": a stop condition over a fault's whole life, against a real
Prometheus (Debian's) scraping a gauge the test raises.

The fault is real (a port held by a helper process, recorded in the fault ledger); the
run is the real CLI in a subprocess. Before this rule the watch ended with the method: a
condition firing while the steady state after was checked (the faults still on) was
ignored, and the run was called "held".
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from support.exporter import Exporter
from support.harness import cli_env, gameday_argv, wait_for
from support.promquery import wait_value

from chaos_ext._core.ledger import Ledger
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer, free_port
from chaos_ext._runner.verdict import failing_result


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _py(kind: str, name: str, module: str, func: str, **arguments: Any) -> dict[str, Any]:
    provider = {"type": "python", "module": module, "func": func, "arguments": arguments}
    return {"type": kind, "name": name, "provider": provider}


def _plan(tmp: Path, metric: str) -> Path:
    plan = {
        "interval_seconds": 0.5,
        "unreachable_after": 3,
        "conditions": [
            {
                "name": "checkout-burns",
                "promql": f"max({metric})",
                "tolerance": {"op": "<", "threshold": 1},
            }
        ],
    }
    path = tmp / "abort.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def _run(tmp: Path, ledger: Path, experiment: dict[str, Any], plan: Path) -> subprocess.Popen[str]:
    path = tmp / "experiment.json"
    path.write_text(json.dumps(experiment))
    argv = gameday_argv(
        "run", "--journal", str(tmp / "journal.json"), "--abort-on", str(plan), str(path)
    )
    return subprocess.Popen(
        argv,
        env=cli_env(ledger),
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _quiet_gauge(exporter: Exporter, prom: PrometheusServer, name: str) -> tuple[str, Any]:
    """A gauge at 0, once Prometheus has scraped it at 0 (the condition holds)."""
    gauge = exporter.gauge(name)
    gauge.set(0)
    wait_value(prom, name, 0)
    return name, gauge


def _breach_when(
    proc: subprocess.Popen[str], marker: Path, gauge: Any
) -> tuple[float, dict[str, Any], str]:
    try:
        wait_for(marker.exists, 60, f"the run to reach {marker.name}")
        time.sleep(0.5)
        assert proc.poll() is None, "the run ended before the breach"
        gauge.set(1)
        breach = time.time()
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    return breach, json.loads((marker.parent / "journal.json").read_text()), output


def test_a_stop_condition_during_the_steady_state_after_aborts_and_undoes_at_once(
    ledger_path: Path,
    tmp_path: Path,
    exporter: Exporter,
    prom: PrometheusServer,
    metric: Callable[[str], str],
) -> None:
    """The steady state after takes 8 s and runs with the fault still on: a breach in it
    ends it, the fault is undone within 2 s of the firing, the run is aborted."""
    name, gauge = _quiet_gauge(exporter, prom, metric("burn"))
    port, ran, checking = free_port(), tmp_path / "method-ran", tmp_path / "checking-after"
    slow_after = _py(
        "probe",
        "slow-check",
        "support.verdictkit",
        "behave",
        mode="hang",
        seconds=8,
        marker=str(checking),
        when="after",
        ran=str(ran),
    )
    experiment = {
        "title": "a slow steady state after",
        "description": "docs/verdicts.md, Stops, rule 1",
        "configuration": {"prometheus_url": prom.url},
        "steady-state-hypothesis": {"title": "ok", "probes": [{**slow_after, "tolerance": True}]},
        "method": [
            _py("action", "hold-a-port", "support.faultkit", "hold_port", port=port, seconds=120),
            _py("action", "note-it", "support.verdictkit", "behave", touch=str(ran)),
        ],
        "rollbacks": [],
    }
    proc = _run(tmp_path, ledger_path, experiment, _plan(tmp_path, name))
    breach, journal, output = _breach_when(proc, checking, gauge)
    assert proc.returncode == 2, output
    assert journal["gameday"]["outcome"] == "aborted", output
    fired = journal["gameday"]["abort"]["fired"]
    assert fired["condition"] == "checkout-burns", fired
    stop = journal["gameday"]["stops"][0]
    assert (stop["cause"], stop["phase"], stop["effect"]) == (
        "stop-condition",
        "after",
        "stopped the run",
    ), journal["gameday"]["stops"]
    assert stop["fired_at"] == fired["at_unix"] and breach <= stop["fired_at"] < breach + 3
    (entry,) = journal["gameday"]["ledger"]
    assert entry["state"] == "closed" and not _port_open(port)
    assert entry["closed_at"] - fired["at_unix"] <= 2.0, (entry, fired)
    after = journal["steady_states"]["after"]
    assert after is None or after.get("steady_state_met") is not True, after
    assert Ledger(ledger_path).open_entries() == []


def test_a_stop_condition_cuts_a_long_python_action_short_within_a_second(
    ledger_path: Path,
    tmp_path: Path,
    exporter: Exporter,
    prom: PrometheusServer,
    metric: Callable[[str], str],
) -> None:
    """A pure-Python action computing for 30 s is ended at once, and says it was cut
    short (never "did not run")."""
    name, gauge = _quiet_gauge(exporter, prom, metric("burn_busy"))
    port, busy = free_port(), tmp_path / "busy"
    experiment = {
        "title": "a long Python action",
        "description": "docs/verdicts.md, Stops, rule 1",
        "configuration": {"prometheus_url": prom.url},
        "method": [
            _py("action", "hold-a-port", "support.faultkit", "hold_port", port=port, seconds=120),
            _py("action", "slow-inject", "support.timekit", "busy", seconds=30, marker=str(busy)),
        ],
        "rollbacks": [],
    }
    proc = _run(tmp_path, ledger_path, experiment, _plan(tmp_path, name))
    _, journal, output = _breach_when(proc, busy, gauge)
    assert proc.returncode == 2, output
    assert journal["gameday"]["outcome"] == "aborted", output
    slow = journal["run"][1]
    fired_at = journal["gameday"]["abort"]["fired"]["at_unix"]
    from datetime import datetime  # noqa: PLC0415

    ended = datetime.fromisoformat(slow["end"]).timestamp()
    assert ended - fired_at <= 1.0, (slow["end"], fired_at)
    assert slow["status"] == "interrupted"
    why = failing_result(slow)
    assert why is not None and why.startswith("cut short after"), why
    assert "did not run" not in output
    assert "cut short after" in output
    assert not _port_open(port)
