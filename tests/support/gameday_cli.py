"""Run the real `gameday` CLI in a subprocess from any fixture scope (module-scoped too)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support.harness import ROOT, TESTS, cli_env, gameday_argv

__all__ = ["ROOT", "TESTS", "cli_env", "run_gameday"]


def run_gameday(
    cwd: Path, ledger: Path, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``gameday ARGS`` with its own ledger; never raises on a non-zero exit."""
    return subprocess.run(
        gameday_argv(*args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=cli_env(ledger),
        cwd=cwd,
        check=False,
    )
