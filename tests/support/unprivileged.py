"""Run the real ``gameday`` CLI as user ``nobody``: no root, no capabilities.

``setpriv --reuid=nobody --regid=nogroup --clear-groups`` (util-linux) drops
root for real. The interpreter must be one ``nobody`` may execute: the tests'
own (a venv made from Debian's python3), or, when that one lives where
``nobody`` cannot go (a pyenv under ``/root``), the system's ``python3`` of the
same minor version with the tests' ``site-packages`` on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.harness import pythonpath

__all__ = ["nobody_dir", "run_as_nobody"]

_DROP = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def _runs(python: str, env: dict[str, str]) -> bool:
    probe = [*_DROP, python, "-c", "import chaos_ext, rich, chaoslib"]
    done = subprocess.run(probe, env=env, capture_output=True, timeout=60, check=False)
    return done.returncode == 0


def _interpreter(home: Path) -> tuple[str, str]:
    """(python, PYTHONPATH) that nobody can run with this checkout's chaos_ext."""
    if os.getuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("running as nobody needs root and setpriv (util-linux)")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "PYTHONPATH": pythonpath()}
    if _runs(sys.executable, env):
        return sys.executable, pythonpath()
    system = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    env["PYTHONPATH"] = os.pathsep.join([pythonpath(), *site.getsitepackages()])
    if Path(system).exists() and _runs(system, env):
        return system, env["PYTHONPATH"]
    pytest.skip(f"no Python that nobody may run with chaos_ext ({sys.executable}, {system})")


@contextmanager
def nobody_dir() -> Iterator[Path]:
    """A fresh directory that nobody may write (pytest's tmp_path is root's, mode 0700)."""
    path = Path(tempfile.mkdtemp(prefix="gameday-nobody-", dir="/tmp"))
    try:
        os.chmod(path, 0o777)  # noqa: S103 - a throwaway directory for the unprivileged CLI
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run_as_nobody(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``gameday ARGS`` as nobody, its ledger and HOME in ``home``; never raises on exit codes."""
    python, path = _interpreter(home)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "PYTHONPATH": path,
        "GAMEDAY_LEDGER": str(home / "ledger.sqlite3"),
        "COLUMNS": "200",
    }
    return subprocess.run(
        [*_DROP, python, "-m", "chaos_ext.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=home,
        check=False,
    )
