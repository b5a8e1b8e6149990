"""The load never outlives its run: SIGKILL + `gameday rollback`, its own cap, SIGTERM, a run."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.harness import ROOT, cli_env, gameday_argv, wait_for
from support.servers.http_target import HttpTarget

from chaos_ext._core.helper import find_helpers
from chaos_ext._core.ledger import Ledger

SMOKE = ROOT / "experiments" / "http-load-smoke.json"


def _load(url: str, **arguments: Any) -> dict[str, Any]:
    return {
        "type": "action",
        "name": "background-load",
        "provider": {
            "type": "python",
            "module": "chaos_ext.load.actions",
            "func": "drive_http_load",
            "arguments": {"urls": [url], **arguments},
        },
    }


def _experiment(url: str, **arguments: Any) -> dict[str, Any]:
    return {
        "title": "load that must not outlive the run",
        "description": "background load, then a long wait",
        "method": [
            _load(url, **arguments),
            {
                "type": "probe",
                "name": "wait",
                "provider": {"type": "process", "path": "sleep", "arguments": "60", "timeout": 90},
            },
        ],
        "rollbacks": [
            {
                "type": "action",
                "name": "stop-load",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.load.actions",
                    "func": "stop_http_load",
                },
            }
        ],
    }


def _start_run(ledger: Path, experiment: Path, tmp: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        gameday_argv("run", "--journal", str(tmp / "journal.json"), str(experiment)),
        env=cli_env(ledger),
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _load_running(ledger: Path, target: HttpTarget) -> list[str]:
    entries = [e.id for e in Ledger(ledger).open_entries() if e.kind == "http-load"]
    if entries and all(find_helpers(i) for i in entries) and target.stats()["requests"] > 20:
        return entries
    return []


def _quiet(target: HttpTarget, seconds: float = 1.5) -> bool:
    before = target.stats()["requests"]
    time.sleep(seconds)
    return target.stats()["requests"] == before


@pytest.mark.undoes("http-load")
def test_sigkill_of_the_runner_then_gameday_rollback_stops_the_load(
    no_leaked_loads: Path,
    target: HttpTarget,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    path = write_experiment(_experiment(target.url, rate=100, duration_seconds=60, processes=2))
    proc = _start_run(no_leaked_loads, path, tmp_path)
    wait_for(lambda: bool(_load_running(no_leaked_loads, target)), 30, "the load to run")
    (load_id,) = _load_running(no_leaked_loads, target)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    # the runner is dead; its load keeps going (a background fault) until rolled back
    before = target.stats()["requests"]
    time.sleep(1.0)
    assert target.stats()["requests"] > before + 50
    assert len(find_helpers(load_id)) == 3  # the coordinator and its two workers

    result = gameday("rollback")
    assert result.returncode == 0, result.stderr
    assert "stopped the load (3 process(es))" in result.stderr
    assert not find_helpers(load_id)
    assert _quiet(target)  # counted at the server: nothing keeps sending
    assert Ledger(no_leaked_loads).open_entries() == []


def test_the_load_stops_at_its_own_cap_without_any_rollback(
    no_leaked_loads: Path,
    target: HttpTarget,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    path = write_experiment(_experiment(target.url, rate=50, duration_seconds=3))
    proc = _start_run(no_leaked_loads, path, tmp_path)
    wait_for(lambda: bool(_load_running(no_leaked_loads, target)), 30, "the load to run")
    (load_id,) = _load_running(no_leaked_loads, target)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    wait_for(lambda: not find_helpers(load_id), 15, "the load to end by itself")
    assert _quiet(target)
    assert target.stats()["requests"] == 150
    # the entry stays open for the record until a rollback closes it
    result = gameday("rollback")
    assert result.returncode == 0, result.stderr
    assert "load had already finished; 150 requests sent" in result.stderr


def test_sigterm_rolls_back_and_the_journal_keeps_the_buckets(
    no_leaked_loads: Path,
    target: HttpTarget,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
) -> None:
    path = write_experiment(_experiment(target.url, rate=40, duration_seconds=60))
    proc = _start_run(no_leaked_loads, path, tmp_path)
    wait_for(lambda: bool(_load_running(no_leaked_loads, target)), 30, "the load to run")
    (load_id,) = _load_running(no_leaked_loads, target)
    time.sleep(2.0)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, output
    assert not find_helpers(load_id)
    assert _quiet(target)
    journal = json.loads((tmp_path / "journal.json").read_text())
    (rollback,) = journal["rollbacks"]
    assert rollback["output"]["undone"] == 1
    stopped = rollback["output"]["results"][load_id]
    assert stopped["load"]["status"] == "stopped"
    assert len(stopped["buckets"]) >= 2
    assert all(b["sent"] == 40 for b in stopped["buckets"][:2])
    assert stopped["sent"] == target.stats()["requests"]
    assert Ledger(no_leaked_loads).open_entries() == []


def test_the_smoke_experiment_holds_and_sees_the_fault(
    no_leaked_loads: Path,
    target: HttpTarget,
    tmp_path: Path,
) -> None:
    env = {**cli_env(no_leaked_loads), "GAMEDAY_LOAD_TARGET": target.url}
    result = subprocess.run(
        gameday_argv("run", "--journal", "j.json", str(SMOKE)),
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    journal = json.loads((tmp_path / "j.json").read_text())
    before = journal["steady_states"]["before"]["probes"][0]["output"]
    assert before["baseline"] is True and before["ok"] == 40
    during = journal["steady_states"]["after"]["probes"][0]["output"]
    assert during["error_ratio"] == 0
    assert during["p50_ms"] >= 150  # the 150 ms slowdown is in the judged window
    (stopped,) = journal["rollbacks"][1]["output"]["results"].values()
    assert [b["sent"] for b in stopped["buckets"] if b["scheduled"]] == [20] * 12
    assert {e["state"] for e in journal["gameday"]["ledger"]} == {"closed"}
    # a hypothesis that the fault breaks: p99 under 100 ms deviates
    strict = json.loads(SMOKE.read_text())
    strict["steady-state-hypothesis"]["probes"][1]["tolerance"]["range"] = [0, 100]
    (tmp_path / "strict.json").write_text(json.dumps(strict))
    result = subprocess.run(
        gameday_argv(
            "run",
            "--hypothesis-strategy",
            "after-method-only",
            "--journal",
            "s.json",
            "strict.json",
        ),
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr


def test_gameday_validate_refuses_an_unbounded_load(
    target: HttpTarget,
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    assert gameday("validate", str(SMOKE)).returncode == 0
    path = write_experiment(_experiment(target.url, rate=5000, duration_seconds=60))
    result = gameday("validate", str(path))
    assert result.returncode == 3
    text = " ".join((result.stdout + result.stderr).split())
    assert "peak 5000 req/s is above the cap 500; above 500 req/s set max_rate explicitly" in text
    assert target.stats()["requests"] == 0  # validation touched nothing
