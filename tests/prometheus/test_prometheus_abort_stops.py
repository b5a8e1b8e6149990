"""A stop condition stops whatever the run is doing (issue 26 item 1), against a real
Prometheus: a 60 s ``pauses.after``, a shell action's processes, the settle loop.

The breach is a gauge the test raises on the exporter Prometheus scrapes every
second; the rollback writes the time it started.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from support.exporter import Exporter
from support.harness import cli_env, gameday_argv, wait_for
from support.leftovers import marked_sleep, running_with_argument
from support.promquery import wait_value

from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer

ROLLBACK_WITHIN_S = 1.0  # issue 26: from the watch's decision to the rollback's start


def _plan(tmp: Path, metric: str) -> Path:
    path = tmp / "abort.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "interval_seconds": 0.5,
                "unreachable_after": 3,
                "conditions": [
                    {
                        "name": "errors",
                        "promql": f"max({metric})",
                        "tolerance": {"op": "<", "threshold": 0.05},
                    }
                ],
            }
        )
    )
    return path


def _mark(label: str, path: Path) -> dict[str, Any]:
    return {
        "type": "action",
        "name": label,
        "provider": {
            "type": "python",
            "module": "support.timekit",
            "func": "mark_time",
            "arguments": {"path": str(path)},
        },
    }


def _run(
    tmp: Path,
    ledger: Path,
    prom_url: str,
    plan: Path,
    method: list[Any],
    *extra: str,
    hypothesis: dict[str, Any] | None = None,
) -> subprocess.Popen[str]:
    experiment: dict[str, Any] = {
        "title": "stop condition",
        "description": "issue 26",
        "method": method,
        "configuration": {"prometheus_url": prom_url},
        "rollbacks": [_mark("mark-rollback", tmp / "rb")],
    }
    if hypothesis is not None:
        experiment["steady-state-hypothesis"] = hypothesis
    path = tmp / "experiment.json"
    path.write_text(json.dumps(experiment))
    return subprocess.Popen(
        gameday_argv(
            "run",
            "--journal",
            str(tmp / "journal.json"),
            "--abort-on",
            str(plan),
            *extra,
            str(path),
        ),
        env=cli_env(ledger),
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(proc: subprocess.Popen[str], tmp: Path) -> tuple[dict[str, Any], str]:
    try:
        output, _ = proc.communicate(timeout=50)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    return json.loads((tmp / "journal.json").read_text()), output


def _aborted(journal: dict[str, Any], output: str, proc: subprocess.Popen[str], tmp: Path) -> float:
    """Seconds from the watch's decision to the rollback's start; checks the outcome."""
    assert proc.returncode == 2, output
    assert journal["status"] == "aborted", output
    assert journal["gameday"]["outcome"] == "aborted", journal["gameday"]
    fired = journal["gameday"]["abort"]["fired"]
    assert fired["condition"] == "errors" and fired["value"] == 0.2, fired
    assert [r["status"] for r in journal["rollbacks"]] == ["succeeded"], output
    took = float((tmp / "rb").read_text()) - float(fired["at_unix"])
    sys.stderr.write(f"\nrollback started {took:.3f} s after the abort fired\n")
    return took


def test_a_breach_during_a_60_s_pause_rolls_back_within_a_second(
    ledger_path: Path,
    tmp_path: Path,
    exporter: Exporter,
    prom: PrometheusServer,
    metric: Callable[[str], str],
) -> None:
    name = metric("pause_breach")
    gauge = exporter.gauge(name)
    gauge.set(0.0)
    wait_value(prom, name, 0.0)
    pausing = {**_mark("then-pause", tmp_path / "acted"), "pauses": {"after": 60}}
    proc = _run(tmp_path, ledger_path, prom.url, _plan(tmp_path, name), [pausing])
    wait_for((tmp_path / "acted").exists, 30, "the action before the pause")
    time.sleep(1.0)  # in the pause
    gauge.set(0.2)
    journal, output = _finish(proc, tmp_path)
    assert _aborted(journal, output, proc, tmp_path) <= ROLLBACK_WITHIN_S, output


def test_a_breach_during_a_shell_action_ends_its_processes(
    ledger_path: Path,
    tmp_path: Path,
    exporter: Exporter,
    prom: PrometheusServer,
    metric: Callable[[str], str],
) -> None:
    name, sleep = metric("shell_breach"), marked_sleep()
    gauge = exporter.gauge(name)
    gauge.set(0.0)
    wait_value(prom, name, 0.0)
    marker = tmp_path / "in-the-shell"
    shell = {
        "type": "action",
        "name": "shell-sleep",
        "pauses": {"after": 60},
        "provider": {
            "type": "process",
            "path": "sh",
            "arguments": f"-c 'touch {marker}; sleep {sleep}'",
        },
    }
    proc = _run(tmp_path, ledger_path, prom.url, _plan(tmp_path, name), [shell])
    wait_for(lambda: marker.exists() and bool(running_with_argument(sleep)), 30, "the shell")
    gauge.set(0.2)
    journal, output = _finish(proc, tmp_path)
    assert _aborted(journal, output, proc, tmp_path) <= ROLLBACK_WITHIN_S, output
    assert running_with_argument(sleep) == [], "a process of the shell action is left"


def test_a_breach_while_settling_stops_the_run_before_anything_is_injected(
    ledger_path: Path,
    tmp_path: Path,
    exporter: Exporter,
    prom: PrometheusServer,
    metric: Callable[[str], str],
) -> None:
    name = metric("settle_breach")
    gauge = exporter.gauge(name)
    gauge.set(0.0)
    wait_value(prom, name, 0.0)
    never = {
        "title": "never steady",
        "probes": [
            {
                "type": "probe",
                "name": "file-exists",
                "tolerance": 0,
                "provider": {
                    "type": "process",
                    "path": "test",
                    "arguments": ["-e", str(tmp_path / "never")],
                },
            }
        ],
    }
    proc = _run(
        tmp_path,
        ledger_path,
        prom.url,
        _plan(tmp_path, name),
        [_mark("inject", tmp_path / "acted")],
        "--settle",
        "40",
        hypothesis=never,
    )
    time.sleep(3.0)  # settling: the hypothesis fails every 2 s
    assert proc.poll() is None
    gauge.set(0.2)
    started = time.monotonic()
    journal, output = _finish(proc, tmp_path)
    assert time.monotonic() - started < 10, output  # not the 40 s settle time
    assert proc.returncode == 2, output
    assert (journal["status"], journal["gameday"]["outcome"]) == ("aborted", "aborted"), output
    assert journal["gameday"]["abort"]["fired"]["condition"] == "errors"
    assert not (tmp_path / "acted").exists(), "the method ran after the stop condition fired"
    # nothing was injected, so no rollback is needed (docs/verdicts.md, rule 4)
    assert journal["rollbacks"] == [], output
    assert "rollbacks not needed" in journal["gameday"]["rollbacks_skipped"]
