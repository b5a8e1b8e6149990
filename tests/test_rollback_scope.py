"""Rollback activities undo this run's faults; others' only when asked, a live run's never.

Issue 22, point 5. The other "run" is a real process that injected a real
fault (a network namespace) through the ledger.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.harness import netns_list

from chaos_ext._core.ledger import Ledger
from chaos_ext.faults.actions import rollback_faults

INJECT_AND_WAIT = (
    "import sys, time; sys.path.insert(0, sys.argv[2]);"
    "from support.faultkit import create_netns; create_netns(sys.argv[1]);"
    "print('injected', flush=True); time.sleep(120)"
)


@pytest.fixture
def other_run(ledger_path: Path, netns_name: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", INJECT_AND_WAIT, netns_name, str(Path(__file__).parent)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "injected\n"
    yield proc
    proc.kill()
    proc.wait(timeout=10)


def test_a_live_runs_fault_is_never_undone_a_dead_runs_only_when_asked(
    other_run: subprocess.Popen[str], ledger_path: Path, netns_name: str
) -> None:
    assert rollback_faults()["undone"] == 0
    assert rollback_faults(include_dead_runs=True)["undone"] == 0  # it is alive
    assert netns_name in netns_list()
    other_run.send_signal(signal.SIGKILL)
    other_run.wait(timeout=10)
    assert rollback_faults()["undone"] == 0  # not this run's
    assert netns_name in netns_list()
    assert rollback_faults(include_dead_runs=True)["undone"] == 1
    assert netns_name not in netns_list()
    assert Ledger(ledger_path).open_entries() == []
