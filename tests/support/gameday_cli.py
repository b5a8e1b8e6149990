"""Run the real `gameday` CLI in a subprocess (for module-scoped fixtures and domain tests).

Same environment as the root conftest's ``gameday`` fixture; usable where
``from conftest import ...`` would pick a domain's own conftest.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["ROOT", "TESTS", "gameday_env", "run_gameday"]

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent


def gameday_env(ledger: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["GAMEDAY_LEDGER"] = str(ledger)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(ROOT)])
    env["COLUMNS"] = "200"
    return env


def run_gameday(
    cwd: Path, ledger: Path, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chaos_ext.cli.main", *args], capture_output=True, text=True,
        timeout=timeout, env=gameday_env(ledger), cwd=cwd, check=False,
    )  # fmt: skip
