"""Plain helpers for tests: run the real CLI, wait for conditions, list namespaces.

Import them with ``from support.harness import ...`` (not ``from conftest``:
pytest loads every domain ``conftest.py`` as the module ``conftest``, so that
name is ambiguous). Fixtures stay in ``tests/conftest.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
MUTANT_SITE = TESTS / "support" / "mutant_site"  # the mutation check's no-op undo (issue 34)


def pythonpath() -> str:
    """``PYTHONPATH`` for a CLI the tests start; in the mutation check, its no-op undo first."""
    mutated = os.environ.get("GAMEDAY_MUTANT_UNDO") or os.environ.get("GAMEDAY_MUTANT_ROLLBACK")
    mutant = [str(MUTANT_SITE)] if mutated else []
    return os.pathsep.join([*mutant, str(TESTS), str(ROOT)])


def cli_env(ledger: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["GAMEDAY_LEDGER"] = str(ledger)
    env["PYTHONPATH"] = pythonpath()
    env["COLUMNS"] = "200"
    return env


def gameday_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "chaos_ext.cli", *args]


def netns_list() -> set[str]:
    out = subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, check=True, timeout=10
    ).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def signal_and_collect(
    proc: subprocess.Popen[str], sig: int, failure: str, timeout: float = 60
) -> str:
    """Send ``sig`` to a CLI run and return its output once it exits.

    A run still alive ``timeout`` seconds later is killed and the test fails
    with ``failure`` (e.g. "the runner ignored SIGTERM") and the output.
    """
    proc.send_signal(sig)
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate(timeout=10)
        raise AssertionError(f"{failure}:\n{output}") from None
    return str(output)
