"""The dead-man switch's settings reach the ledger, and a watchdog ends with its entry.

Real ``gameday run`` / ``gameday validate`` processes; the fault is a real
network namespace (``support.faultkit.create_netns``, recorded with
``fault(...)`` as any action). The crash rows (kills, stops, races) are in
``tests/crash/test_crash_watchdog.py``.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chaos_ext._core.watchdog import find_watchdogs, parse_grace
from chaos_ext.errors import InvalidArgument


@pytest.mark.parametrize(("given", "seconds"), [(0, 0.0), (2.5, 2.5), ("60", 60.0)])
def test_a_grace_is_a_number_of_seconds_and_0_is_off(given: Any, seconds: float) -> None:
    assert parse_grace(given) == seconds


@pytest.mark.parametrize("given", [-1, "soon", True, float("inf"), 86401, None])
def test_a_grace_that_is_not_0_to_86400_seconds_is_refused(given: Any) -> None:
    with pytest.raises(InvalidArgument, match="watchdog_grace_seconds"):
        parse_grace(given)


def _experiment(netns: str, **gameday: Any) -> dict[str, Any]:
    experiment: dict[str, Any] = {
        "title": "one namespace, made and undone",
        "description": "the watchdog's settings",
        "method": [
            {
                "type": "action",
                "name": "make-namespace",
                "provider": {
                    "type": "python",
                    "module": "support.faultkit",
                    "func": "create_netns",
                    "arguments": {"name": netns},
                },
            }
        ],
    }
    if gameday:
        experiment["extensions"] = [{"name": "gameday", **gameday}]
    return experiment


@pytest.mark.parametrize(("extension", "flag", "recorded"), [(7, None, 7.0), (7, "0", 0.0)])
def test_the_grace_is_recorded_in_the_entry_and_the_watchdog_ends_with_it(
    extension: float,
    flag: str | None,
    recorded: float,
    netns_name: str,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    path = write_experiment(_experiment(netns_name, watchdog_grace_seconds=extension))
    options = ["--watchdog-grace", flag] if flag is not None else []
    run = gameday("run", "--journal", "j.json", *options, str(path))
    assert run.returncode == 0, run.stderr[-3000:]
    (entry,) = json.loads((tmp_path / "j.json").read_text())["gameday"]["ledger"]
    assert entry["state"] == "closed"
    assert entry["watchdog"]["grace_seconds"] == recorded
    assert entry["watchdog"]["deadline"] is None  # untimed
    pid = entry["watchdog"]["pid"]
    deadline = time.monotonic() + 15  # it polls: gone within a moment of the close
    while find_watchdogs(entry["id"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not find_watchdogs(entry["id"]), f"watchdog {pid} outlived its closed entry"
    log = Path(entry["watchdog"]["log"]).read_text()
    assert "entry closed" in log and "undone:" not in log, log


def test_validate_refuses_a_bad_grace_in_the_extension(
    netns_name: str,
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    path = write_experiment(_experiment(netns_name, watchdog_grace_seconds=-5))
    result = gameday("validate", str(path))
    assert result.returncode == 3, result.stdout + result.stderr
    assert "watchdog_grace_seconds" in result.stdout + result.stderr


def test_run_help_documents_the_switch(
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    shown = " ".join(gameday("run", "--help").stdout.split())
    assert "--watchdog-grace SECONDS" in shown
    assert "0 turns the dead-run undo off" in shown
    assert "GAMEDAY_WATCHDOG_GRACE" in shown
