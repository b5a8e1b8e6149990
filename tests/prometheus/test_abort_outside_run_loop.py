"""An abort is only delivered where chaoslib handles it, whichever way the run is set up.

The rule: the watch's interrupt (SIGUSR1, ``SystemExit(20)`` in chaoslib) reaches the
main thread only while it is inside chaoslib's run loop, the ``try`` of
``Runner._run`` that turns it into the status ``interrupted`` and still plays the
rollbacks and writes the journal. Outside that loop a ``SystemExit`` escapes
``Runner.run`` and ``chaos run`` writes no journal at all (seen once in a LANES=2 run:
a Watchdog alert, ``for: 0s``, fired while chaos run was still emitting ``running``).

``support.setup_window`` holds chaoslib in each window outside the loop until the watch
has fired, so the interrupt is due exactly there, every time:

- before the loop (the ``running`` event): the fire is recorded at once and the
  interrupt follows at the first event inside the loop (gate hypothesis or method),
  under plain ``chaos run`` and under ``gameday run``, with and without a hypothesis;
- after the loop (``control.end``, reached without rollbacks when the gate hypothesis
  fails under the ``deviated`` rollback strategy): the watch stopped with the gate, so
  nothing fires.

Real Prometheus (Debian's) scraping a real exporter; real ``chaos run`` and ``gameday run``
processes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.exporter import Exporter
from support.harness import cli_env, gameday_argv
from support.promquery import wait_value

from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer

CHAOS = Path(sys.executable).with_name("chaos")
HOLD_S = 30.0  # the hold's bound: far above a fire (first round, 0.5 s interval)

pytestmark = pytest.mark.slow


def _condition(name: str) -> dict[str, Any]:
    return {"name": "errors", "promql": f"max({name})", "tolerance": {"op": "<", "threshold": 1}}


def _mark(path: Path, name: str) -> dict[str, Any]:
    return {
        "type": "action",
        "name": name,
        "provider": {
            "type": "python",
            "module": "support.timekit",
            "func": "mark_time",
            "arguments": {"path": str(path)},
        },
    }


def _hold(hold: str, record: Path) -> dict[str, Any]:
    return {
        "name": f"hold-{hold}",
        "provider": {
            "type": "python",
            "module": "support.setup_window",
            "arguments": {"hold": hold, "timeout": HOLD_S, "record": str(record)},
        },
    }


def _abort_control(name: str) -> dict[str, Any]:
    return {
        "name": "abort-on-errors",
        "provider": {
            "type": "python",
            "module": "chaos_ext.controls.abort",
            "arguments": {"interval_seconds": 0.5, "conditions": [_condition(name)]},
        },
    }


def _hypothesis(probe_argv: str) -> dict[str, Any]:
    return {
        "title": "the gate",
        "probes": [
            {
                "type": "probe",
                "name": "gate",
                "tolerance": 0,
                "provider": {"type": "process", "path": "sh", "arguments": probe_argv},
            }
        ],
    }


@pytest.mark.parametrize("gate", [True, False], ids=["with-gate-hypothesis", "method-only"])
@pytest.mark.parametrize("entry", ["chaos-run", "gameday-run"])
def test_an_abort_due_while_the_run_is_set_up_interrupts_inside_the_run_loop(
    entry: str,
    gate: bool,
    ledger_path: Path,
    tmp_path: Path,
    exporter: Exporter,
    prom: PrometheusServer,
    metric: Callable[[str], str],
) -> None:
    name = metric("setup_abort")
    exporter.gauge(name).set(5)  # already out of tolerance: the watch's first round fires
    wait_value(prom, name, 5, timeout=30)
    record, method_ran, rolled_back = tmp_path / "hold", tmp_path / "method", tmp_path / "rb"
    controls = [_hold("setup", record)]
    if entry == "chaos-run":
        controls.insert(0, _abort_control(name))
    experiment: dict[str, Any] = {
        "title": "an abort due before chaoslib's run loop",
        "description": "the watch fires while chaoslib emits running",
        "configuration": {"prometheus_url": prom.url},
        "runtime": {"rollbacks": {"strategy": "always"}},
        "controls": controls,
        "method": [
            _mark(method_ran, "method-started"),
            {
                "type": "probe",
                "name": "wait",
                "provider": {"type": "process", "path": "sleep", "arguments": "60", "timeout": 90},
            },
        ],
        "rollbacks": [_mark(rolled_back, "mark-rollback")],
    }
    if gate:
        experiment["steady-state-hypothesis"] = _hypothesis("-c true")
    path = tmp_path / "experiment.json"
    path.write_text(json.dumps(experiment))
    if entry == "chaos-run":
        journal_path = tmp_path / "journal.json"
        argv = [str(CHAOS), "--no-version-check", "run", "--journal-path", str(journal_path)]
        argv.append(str(path))
    else:
        plan = tmp_path / "abort.yaml"
        plan.write_text(yaml.safe_dump({"interval_seconds": 0.5, "conditions": [_condition(name)]}))
        journal_path = tmp_path / "journal-experiment.json"
        argv = gameday_argv(
            "run", "--journal-dir", str(tmp_path), "--abort-on", str(plan), "--recover", "0"
        )
        argv.append(str(path))
    started = time.monotonic()
    result = subprocess.run(
        argv,
        env=cli_env(ledger_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    output = f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    # the hold saw the verdict and returned: the fire really was due before the loop
    assert record.exists() and record.read_text() == "fired", output
    assert journal_path.exists(), output
    journal = json.loads(journal_path.read_text())
    # chaoslib's status for a SystemExit it handled; gameday names the abort
    assert journal["status"] == ("interrupted" if entry == "chaos-run" else "aborted"), output
    assert journal["gameday"]["abort"]["fired"]["condition"] == "errors", output
    # interrupted at the gate hypothesis or in the method; whatever ran was rolled back
    # (gameday plays no rollbacks when the method never ran: nothing was injected)
    assert rolled_back.exists() or not method_ran.exists(), output
    if entry == "chaos-run":  # the rollback strategy is always
        assert rolled_back.exists(), output
    assert time.monotonic() - started < 60, output  # the method's 60 s sleep was cut short
    if entry == "gameday-run":
        assert result.returncode == 2, output


def test_a_failed_gate_stops_the_watch_so_nothing_fires_after_chaos_runs_loop(
    ledger_path: Path,
    tmp_path: Path,
    exporter: Exporter,
    prom: PrometheusServer,
    metric: Callable[[str], str],
) -> None:
    name = metric("after_gate")
    gauge = exporter.gauge(name)
    gauge.set(0)
    wait_value(prom, name, 0, timeout=30)
    record, gate_ran = tmp_path / "hold", tmp_path / "gate-ran"
    experiment = {
        "title": "a failed gate, then a breach while chaoslib plays control.end",
        "description": "no rollbacks (strategy deviated): control.end follows the gate",
        "configuration": {"prometheus_url": prom.url},
        "runtime": {"rollbacks": {"strategy": "deviated"}},
        "controls": [_abort_control(name), _hold("end", record)],
        "steady-state-hypothesis": _hypothesis(f"-c 'touch {gate_ran}; exit 1'"),
        "method": [_mark(tmp_path / "method", "never-reached")],
        "rollbacks": [_mark(tmp_path / "rb", "never-played")],
    }
    path = tmp_path / "experiment.json"
    path.write_text(json.dumps(experiment))
    journal_path = tmp_path / "journal.json"

    def breach_once_the_gate_ran() -> None:  # the test's own thread, bounded by the hold
        deadline = time.monotonic() + HOLD_S
        while not gate_ran.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        gauge.set(5)

    breacher = threading.Thread(target=breach_once_the_gate_ran, daemon=True)
    breacher.start()
    result = subprocess.run(
        [str(CHAOS), "--no-version-check", "run", "--journal-path", str(journal_path), str(path)],
        env=cli_env(ledger_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    breacher.join(timeout=HOLD_S + 5)
    output = f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert gate_ran.exists(), output
    assert journal_path.exists(), output
    journal = json.loads(journal_path.read_text())
    assert journal["steady_states"]["before"]["steady_state_met"] is False, output
    assert journal["gameday"]["abort"]["fired"] is None, output
    assert record.read_text() == "stopped", output
    # the breach was real: Prometheus has it, and the watch was no longer looking
    wait_value(prom, name, 5, timeout=30)
    assert not (tmp_path / "method").exists() and not (tmp_path / "rb").exists()
