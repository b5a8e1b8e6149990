"""SIGTERM or SIGINT ends a run within 10 s, whatever pause is pending (issue 22, defect 4).

chaoslib sleeps ``pauses.after`` in a ``finally``: a signal landing in the
action used to wait out the whole pause (32-35 s with a 30 s pause). The
fault here is real (a network namespace), the pause 30 s, and two CPU-bound
processes keep both cores busy meanwhile, as other jobs do on a CI machine.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.harness import cli_env, gameday_argv, netns_list, signal_and_collect, wait_for

from chaos_ext._core.ledger import Ledger
from chaos_ext._runner.signals import SIGNAL_EXIT_BUDGET_S

BURN = "import time\nend = time.monotonic() + 90\nwhile time.monotonic() < end: pass\n"


@pytest.fixture
def busy_machine() -> Iterator[None]:
    """Two busy loops (this machine has 2 cores), bounded to 90 s."""
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(2)]
    try:
        yield
    finally:
        for proc in burners:
            proc.kill()
            proc.wait(timeout=10)


def _py(label: str, func: str, /, **arguments: Any) -> dict[str, Any]:
    return {
        "type": "action",
        "name": label,
        "provider": {
            "type": "python",
            "module": "support.faultkit",
            "func": func,
            "arguments": arguments,
        },
    }


def _experiment(ns: str, where: str) -> dict[str, Any]:
    fault = _py("make-namespace", "create_netns", name=ns)
    slow = _py("slow-action", "nap", seconds=20)
    if where == "action":  # the signal lands in an action followed by a 30 s pause
        slow["pauses"] = {"after": 30}
        method = [fault, slow]
    else:  # the signal lands in the 30 s pause after the fault
        fault["pauses"] = {"after": 30}
        method = [fault, slow]
    return {
        "title": "a long pause after an action",
        "description": "issue 22, defect 4",
        "method": method,
        "rollbacks": [_py("remove-namespace", "remove_netns", name=ns)],
    }


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("where", ["action", "pause"])
def test_a_signal_ends_the_run_within_the_budget(
    sig: signal.Signals,
    where: str,
    busy_machine: None,
    ledger_path: Path,
    tmp_path: Path,
    netns_name: str,
    write_experiment: Callable[..., Path],
) -> None:
    path = write_experiment(_experiment(netns_name, where))
    proc = subprocess.Popen(
        gameday_argv("run", "--journal", str(tmp_path / "journal.json"), str(path)),
        env=cli_env(ledger_path),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wait_for(lambda: netns_name in netns_list(), 60, "the fault")
    time.sleep(1.5)  # well inside the nap (action) or the pause
    sent = time.monotonic()
    output = signal_and_collect(proc, sig, f"no exit 60 s after {sig.name}")
    took = time.monotonic() - sent
    print(f"{sig.name} in the {where}: exit after {took:.2f} s")  # noqa: T201 - the margin
    assert took < SIGNAL_EXIT_BUDGET_S, output
    assert proc.returncode == 2, output
    journal = json.loads((tmp_path / "journal.json").read_text())
    assert journal["gameday"]["outcome"] == "interrupted"
    assert [r["activity"]["name"] for r in journal["rollbacks"]] == ["remove-namespace"]
    assert netns_name not in netns_list()
    assert Ledger(ledger_path).open_entries() == []


def test_a_signal_right_after_a_ledger_commit_still_interrupts_the_run(
    ledger_path: Path, tmp_path: Path, netns_name: str, write_experiment: Callable[..., Path]
) -> None:
    """Found under load: a SIGTERM landing just after the ledger's COMMIT made its
    transaction cleanup fail ("cannot rollback - no transaction is active"), and that
    error replaced the interrupt: the run went on as if nothing had been received."""
    Ledger(ledger_path)  # the run's first write is then the fault's entry
    path = write_experiment(
        {
            "title": "signal after a commit",
            "description": "-",
            "method": [
                _py("make-namespace", "create_netns", name=netns_name),
                _py("slow-action", "nap", seconds=60),
            ],
        }
    )
    env = {**cli_env(ledger_path), "GAMEDAY_FAILPOINTS": "ledger.after-commit=term"}
    started = time.monotonic()
    run = subprocess.run(
        gameday_argv("run", "--journal", str(tmp_path / "journal.json"), str(path)),
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert time.monotonic() - started < 30, run.stderr  # not the 60 s nap
    assert run.returncode == 2, run.stderr
    journal = json.loads((tmp_path / "journal.json").read_text())
    assert journal["gameday"]["outcome"] == "interrupted", journal["gameday"]
    assert "no transaction is active" not in run.stderr
    assert netns_name not in netns_list()
    assert Ledger(ledger_path).open_entries() == []
