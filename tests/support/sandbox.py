"""Run `gameday sandbox ...` for tests, with a given prefix and state folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.harness import ROOT


def sandbox_cli(
    prefix: str, state: Path, *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "GAMEDAY_LEDGER": str(state / "ledger.sqlite3"),
        "COLUMNS": "200",
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        [sys.executable, "-m", "chaos_ext.cli.main", "sandbox", *args, "--prefix", prefix],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
        check=False,
    )
