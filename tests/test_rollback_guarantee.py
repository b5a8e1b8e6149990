"""`gameday run` rolls back on every exit path; SIGKILL is recovered by `gameday rollback`.

The faults are real: a network namespace and a TCP port held by a helper process.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.harness import cli_env, gameday_argv, netns_list, signal_and_collect, wait_for

from chaos_ext._core.ledger import Ledger


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _py(label: str, func: str, /, kind: str = "action", **arguments: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "name": label,
        "provider": {
            "type": "python",
            "module": "support.faultkit",
            "func": func,
            "arguments": arguments,
        },
    }


def _sleep(seconds: int) -> dict[str, Any]:
    return {
        "type": "probe",
        "name": "wait-in-the-middle",
        "provider": {"type": "process", "path": "sleep", "arguments": str(seconds), "timeout": 90},
    }


def _experiment(method: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "title": "faults that must not outlive the run",
        "description": "creates a namespace and holds a port",
        "method": method,
        **extra,
    }


def _start(ledger: Path, experiment: Path, tmp: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        gameday_argv("run", "--journal", str(tmp / "journal.json"), str(experiment)),
        env=cli_env(ledger),
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _inject_and_wait(
    ledger_path: Path, write_experiment: Callable[..., Path], tmp_path: Path, ns: str, port: int
) -> subprocess.Popen[str]:
    path = write_experiment(
        _experiment(
            [
                _py("make-namespace", "create_netns", name=ns),
                _py("hold-a-port", "hold_port", port=port, seconds=120),
                _sleep(60),
            ]
        )
    )
    proc = _start(ledger_path, path, tmp_path)
    wait_for(
        lambda: len(Ledger(ledger_path).open_entries()) == 2 and _port_open(port),
        30,
        "both faults injected",
    )
    assert ns in netns_list()
    return proc


def test_sigkill_then_gameday_rollback_removes_every_fault(
    ledger_path: Path,
    write_experiment: Callable[..., Path],
    tmp_path: Path,
    netns_name: str,
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    port = _free_port()
    proc = _inject_and_wait(ledger_path, write_experiment, tmp_path, netns_name, port)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    # the runner is dead: the faults are still there, recorded as open
    assert netns_name in netns_list()
    assert _port_open(port)
    listed = gameday("ledger", "--json")
    assert {e["kind"] for e in json.loads(listed.stdout)} == {"test-netns", "test-port"}

    result = gameday("rollback")
    assert result.returncode == 0, result.stderr
    assert netns_name not in netns_list()
    assert not _port_open(port)
    assert Ledger(ledger_path).open_entries() == []
    assert "ledger is clean" in result.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_rolls_back_without_help(
    sig: signal.Signals,
    ledger_path: Path,
    write_experiment: Callable[..., Path],
    tmp_path: Path,
    netns_name: str,
) -> None:
    port = _free_port()
    proc = _inject_and_wait(ledger_path, write_experiment, tmp_path, netns_name, port)
    output = signal_and_collect(proc, sig, f"the runner ignored {sig.name}")
    assert proc.returncode == 2, output
    assert netns_name not in netns_list()
    assert not _port_open(port)
    assert Ledger(ledger_path).open_entries() == []
    journal = json.loads((tmp_path / "journal.json").read_text())
    assert journal["status"] == "interrupted"
    assert journal["gameday"]["outcome"] == "interrupted"
    # both faults were undone: by the sweep, or (when the signal landed while
    # hold_port was still inside its `with fault(...)`) at once by the ledger
    assert {e["kind"] for e in journal["gameday"]["ledger"]} == {"test-netns", "test-port"}
    assert {e["state"] for e in journal["gameday"]["ledger"]} == {"closed"}
    assert "test-netns" in {s["kind"] for s in journal["gameday"]["sweep"]}


def test_deviated_hypothesis_still_rolls_back(
    write_experiment: Callable[..., Path],
    tmp_path: Path,
    netns_name: str,
    ledger_path: Path,
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    probe = _py("namespace-absent", "netns_exists", kind="probe", name=netns_name)
    probe["tolerance"] = False
    path = write_experiment(
        _experiment(
            [_py("make-namespace", "create_netns", name=netns_name)],
            **{
                "steady-state-hypothesis": {"title": "no namespace", "probes": [probe]},
                "rollbacks": [_py("remove-namespace", "remove_netns", name=netns_name)],
            },
        )
    )
    result = gameday("run", "--journal", "j.json", str(path))
    assert result.returncode == 1, result.stderr
    journal = json.loads((tmp_path / "j.json").read_text())
    assert journal["deviated"] is True
    # the experiment's own rollback ran (Chaos Toolkit's default strategy would skip it
    # only on failure/interruption; we force "always") and then the ledger was clean
    assert [r["activity"]["name"] for r in journal["rollbacks"]] == ["remove-namespace"]
    assert journal["rollbacks"][0]["output"] is True
    assert netns_name not in netns_list()
    assert Ledger(ledger_path).open_entries() == []


def test_failed_action_still_rolls_back(
    write_experiment: Callable[..., Path],
    tmp_path: Path,
    netns_name: str,
    ledger_path: Path,
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    path = write_experiment(
        _experiment(
            [
                _py("make-namespace", "create_netns", name=netns_name),
                _py("then-fail", "fail", message="injected failure"),
            ]
        )
    )
    result = gameday("run", "--journal", "j.json", str(path))
    assert result.returncode == 2, result.stderr
    journal = json.loads((tmp_path / "j.json").read_text())
    assert journal["gameday"]["outcome"] == "failed"
    assert journal["gameday"]["sweep"][0]["kind"] == "test-netns"
    assert netns_name not in netns_list()
    assert Ledger(ledger_path).open_entries() == []


def test_next_run_recovers_a_dead_runs_faults(
    ledger_path: Path,
    write_experiment: Callable[..., Path],
    tmp_path: Path,
    netns_name: str,
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    port = _free_port()
    proc = _inject_and_wait(ledger_path, write_experiment, tmp_path, netns_name, port)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    quiet = write_experiment(_experiment([]), "quiet.json")

    refused = gameday("run", "--no-recover", "--journal", "q.json", str(quiet))
    assert refused.returncode == 2
    assert "refusing to start" in refused.stderr
    assert netns_name in netns_list()

    result = gameday("run", "--journal", "q.json", str(quiet))
    assert result.returncode == 0, result.stderr
    assert "left open by a dead run" in result.stderr
    assert netns_name not in netns_list()
    assert not _port_open(port)
    assert Ledger(ledger_path).open_entries() == []


def test_held_run_exits_zero_and_records_its_ledger(
    write_experiment: Callable[..., Path],
    tmp_path: Path,
    netns_name: str,
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    probe = _py("namespace-absent", "netns_exists", kind="probe", name=netns_name)
    probe["tolerance"] = False
    path = write_experiment(
        _experiment(
            [_py("make-namespace", "create_netns", name=netns_name)],
            **{
                "steady-state-hypothesis": {"title": "no namespace", "probes": [probe]},
                "rollbacks": [
                    {
                        "type": "action",
                        "name": "undo-recorded-faults",
                        "provider": {
                            "type": "python",
                            "module": "chaos_ext.faults.actions",
                            "func": "rollback_faults",
                        },
                    }
                ],
            },
        )
    )
    # the hypothesis is checked before the method and after the rollbacks only
    result = gameday(
        "run", "--hypothesis-strategy", "before-method-only", "--journal", "j.json", str(path)
    )
    assert result.returncode == 0, result.stderr
    journal = json.loads((tmp_path / "j.json").read_text())
    assert journal["rollbacks"][0]["output"]["undone"] == 1
    (entry,) = journal["gameday"]["ledger"]
    assert entry["state"] == "closed"
    assert entry["kind"] == "test-netns"
    assert journal["gameday"]["sweep"] == []  # nothing left for the sweep


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_inside_a_python_activity_stops_the_method(
    sig: signal.Signals,
    ledger_path: Path,
    write_experiment: Callable[..., Path],
    tmp_path: Path,
    netns_name: str,
) -> None:
    """chaoslib turns exceptions raised in a Python activity into a failed activity and
    carries on; a signal landing there must still stop the method."""
    never = f"{netns_name}x"
    path = write_experiment(
        _experiment(
            [
                _py("make-namespace", "create_netns", name=netns_name),
                _py("nap", "nap", seconds=60),
                _py("must-never-run", "create_netns", name=never),
            ]
        )
    )
    proc = _start(ledger_path, path, tmp_path)
    wait_for(lambda: netns_name in netns_list(), 30, "the first fault")
    time.sleep(1.0)  # inside nap by now
    output = signal_and_collect(proc, sig, f"the runner ignored {sig.name}")
    assert proc.returncode == 2, output
    assert never not in netns_list()
    assert netns_name not in netns_list()
    journal = json.loads((tmp_path / "journal.json").read_text())
    assert journal["status"] == "interrupted"
    assert [r["activity"]["name"] for r in journal["run"]] == ["make-namespace", "nap"]
