"""docs/verdicts.md, "Stops": the first stop decides, every ending has its word.

Real signals to the real CLI in a subprocess; real faults (ledger entries whose undo
the test can see); the process's caught signals read from /proc to know when the
command's own handler is in place. Each test failed on the code before these rules:
a SIGTERM during the ledger sweep was forgotten (the whole recovery wait, then
``not-recovered``), a signal during the imports gave a traceback or exit 143,
SIGUSR1 and chaoslib's unexpected errors were called "a stop condition fired".
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.harness import cli_env, gameday_argv, signal_and_collect, wait_for

from chaos_ext._core.ledger import Ledger


def _py(name: str, module: str, func: str, **arguments: Any) -> dict[str, Any]:
    provider = {"type": "python", "module": module, "func": func, "arguments": arguments}
    return {"type": "action", "name": name, "provider": provider}


def _start(ledger: Path, tmp: Path, experiment: Path, *args: str) -> subprocess.Popen[str]:
    argv = gameday_argv("run", "--journal", str(tmp / "journal.json"), *args, str(experiment))
    return subprocess.Popen(
        argv,
        env=cli_env(ledger),
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _collect(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    """The output once the run exits (the signals were sent already)."""
    return signal_and_collect(proc, 0, f"still running {timeout} s later", timeout)


def _catches(pid: int, sig: signal.Signals) -> bool:
    """Whether the process has a handler for ``sig`` (SigCgt in /proc/<pid>/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(
        (line.split()[1] for line in status.splitlines() if line.startswith("SigCgt")), "0"
    )
    return bool(int(caught, 16) >> (sig - 1) & 1)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_the_ledger_sweep_ends_the_run_without_the_recovery_wait(
    sig: signal.Signals,
    ledger_path: Path,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
) -> None:
    """The undo finishes (3 s); the 60 s recovery wait is skipped; interrupted, exit 2."""
    in_undo = tmp_path / "in-undo"
    leave = _py(
        "leave-a-fault",
        "support.verdictkit",
        "leave_fault",
        undo_marker=str(in_undo),
        undo_seconds=3,
    )
    probe = {**_py("check", "support.verdictkit", "behave"), "type": "probe", "tolerance": True}
    experiment = {
        "title": "a slow undo",
        "description": "docs/verdicts.md, Stops, rule 2",
        "steady-state-hypothesis": {"title": "ok", "probes": [probe]},
        "method": [leave],
        "rollbacks": [],
    }
    proc = _start(ledger_path, tmp_path, write_experiment(experiment), "--recover", "60")
    wait_for(in_undo.exists, 60, "the sweep's undo")
    sent = time.monotonic()
    proc.send_signal(sig)
    output = _collect(proc)
    took = time.monotonic() - sent
    assert proc.returncode == 2, output
    assert took < 10, f"{took:.1f} s\n{output}"
    journal = json.loads((tmp_path / "journal.json").read_text())
    assert journal["gameday"]["outcome"] == "interrupted", output
    assert journal["status"] == "interrupted"
    assert journal["gameday"]["recovery"]["checked"] is False, journal["gameday"]["recovery"]
    (stop,) = journal["gameday"]["stops"]
    assert (stop["cause"], stop["phase"]) == (sig.name, "sweep"), stop
    assert [s["ok"] for s in journal["gameday"]["sweep"]] == [True]
    assert Ledger(ledger_path).open_entries() == []


def test_a_signal_during_the_imports_is_one_line_and_no_journal(
    ledger_path: Path, tmp_path: Path, write_experiment: Callable[..., Path]
) -> None:
    """The command's handler is in place before its heavy imports: SIGTERM there is exit 2
    and one line (no traceback, no 143), nothing injected, no journal."""
    marker = tmp_path / "injected"
    experiment = {
        "title": "never starts",
        "description": "docs/verdicts.md, Stops, rule 2",
        "method": [_py("inject", "support.timekit", "mark_time", path=str(marker))],
        "rollbacks": [],
    }
    proc = _start(ledger_path, tmp_path, write_experiment(experiment))
    wait_for(lambda: _catches(proc.pid, signal.SIGTERM), 10, "the command's first handler")
    proc.send_signal(signal.SIGTERM)
    output = _collect(proc)
    assert proc.returncode == 2, output
    assert "Traceback" not in output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and "no journal was written" in lines[0], output
    assert "nothing was injected" in lines[0]
    assert not (tmp_path / "journal.json").exists()
    assert not marker.exists()


def _quick_experiment(ns_marker: Path, rolled: Path) -> dict[str, Any]:
    """A run that ends within milliseconds of a signal: the second signal lands while
    the process is writing its journal or exiting."""
    nap = {**_py("nap", "support.verdictkit", "behave", mode="hang", marker=str(ns_marker))}
    return {
        "title": "a quick exit",
        "description": "docs/verdicts.md, Stops, rule 2",
        "method": [nap],
        "rollbacks": [_py("rollback", "support.timekit", "mark_time", path=str(rolled))],
    }


@pytest.mark.parametrize("gap_ms", [20, 50, 70, 100, 150, 500, 1000])
def test_a_second_signal_at_any_gap_never_changes_the_exit(
    gap_ms: int, ledger_path: Path, tmp_path: Path, write_experiment: Callable[..., Path]
) -> None:
    """SIGTERM, then SIGINT ``gap_ms`` later: exit 2 whatever the second one hits (the
    rollbacks, the journal's writing, the interpreter's exit), and the journal says so."""
    started, rolled = tmp_path / "started", tmp_path / "rolled"
    proc = _start(
        ledger_path,
        tmp_path,
        write_experiment(_quick_experiment(started, rolled)),
        "--recover",
        "0",
    )
    wait_for(started.exists, 60, "the action")
    proc.send_signal(signal.SIGTERM)
    time.sleep(gap_ms / 1000)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    output = _collect(proc)
    assert proc.returncode == 2, output
    journal = json.loads((tmp_path / "journal.json").read_text())
    assert journal["gameday"]["outcome"] == "interrupted"
    assert journal["gameday"]["exit_code"] == 2
    assert journal["gameday"]["stops"][0]["cause"] == "SIGTERM"
    assert rolled.exists(), "the rollback did not run"


def test_sigusr1_is_a_graceful_exit_not_a_stop_condition(
    ledger_path: Path, tmp_path: Path, write_experiment: Callable[..., Path]
) -> None:
    """chaoslib's exit_gracefully (SIGUSR1) is interrupted, cause graceful-exit."""
    started, rolled = tmp_path / "started", tmp_path / "rolled"
    proc = _start(ledger_path, tmp_path, write_experiment(_quick_experiment(started, rolled)))
    wait_for(started.exists, 60, "the action")
    proc.send_signal(signal.SIGUSR1)
    output = _collect(proc)
    assert proc.returncode == 2, output
    journal = json.loads((tmp_path / "journal.json").read_text())
    assert journal["gameday"]["outcome"] == "interrupted", output
    assert journal["status"] == "interrupted"
    assert journal["gameday"]["stops"][0]["cause"] == "graceful-exit"
    assert "stop condition" not in output
    assert rolled.exists()


def test_an_unexpected_error_in_the_method_is_failed_with_its_cause(
    ledger_path: Path, tmp_path: Path
) -> None:
    """chaoslib writes "aborted" when an error escapes its method (here a NaN timeout,
    which validation refuses, so the runner is called directly): failed, with the error."""
    from rich.console import Console  # noqa: PLC0415

    from chaos_ext._runner.execute import RunOptions, run_experiment  # noqa: PLC0415

    process = {"type": "process", "path": sys.executable, "arguments": "-c pass"}
    experiment = {
        "title": "a NaN timeout",
        "description": "docs/verdicts.md, Stops, rule 3",
        "method": [
            {"type": "action", "name": "a", "provider": {**process, "timeout": float("nan")}}
        ],
        "rollbacks": [],
    }
    options = RunOptions(journal_path=tmp_path / "journal.json", recover_seconds=0)
    console = Console(file=open(tmp_path / "out.txt", "w"), width=200)  # noqa: SIM115
    result = run_experiment(
        tmp_path / "nan.json", experiment, options, Ledger(ledger_path), console
    )
    console.file.close()
    assert result.outcome == "failed", result.journal["gameday"]
    run = result.journal["run"][0]
    assert run["status"] == "failed"
    assert "NaN" in "".join(run["exception"])
    assert result.journal["gameday"]["stops"] == []
