"""Through the real `gameday` CLI: secrets from the environment, SIGKILL then `gameday rollback`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.dbtest import PASSWORD, Db
from support.harness import cli_env, gameday_argv, wait_for

from chaos_ext._core.helper import find_helpers
from chaos_ext._core.ledger import Ledger


def _provider(func: str, module: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "python",
        "module": module,
        "func": func,
        "arguments": arguments,
        "secrets": ["db"],
    }


def _experiment(db: Db, method_tail: list[dict[str, Any]], hold: int) -> dict[str, Any]:
    connection = db.args()
    headroom = {
        "type": "probe",
        "name": "database-headroom",
        "provider": _provider("connection_headroom", "chaos_ext.db.probes", connection),
    }
    return {
        "title": "hold all but 5 connection slots",
        "description": "exhaust_connections through gameday run",
        "secrets": {
            "db": {
                "user": {"type": "env", "key": "GD_TEST_DB_USER"},
                # a GAMEDAY_ name: such variables were once passed to helpers by prefix
                "password": {"type": "env", "key": "GAMEDAY_DB_PASSWORD"},
            }
        },
        "steady-state-hypothesis": {
            "title": "the database has headroom",
            "probes": [{**headroom, "tolerance": {"type": "range", "range": [10, 1000]}}],
        },
        "method": [
            {
                "type": "action",
                "name": "exhaust-connections",
                "provider": _provider(
                    "exhaust_connections",
                    "chaos_ext.db.actions",
                    {**connection, "target": "max-minus-5", "hold_seconds": hold},
                ),
            },
            *method_tail,
        ],
        "rollbacks": [
            {
                "type": "action",
                "name": "release-connections",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.db.actions",
                    "func": "release_connections",
                },
            }
        ],
    }


def _env(ledger: Path, db: Db) -> dict[str, str]:
    return {
        **cli_env(ledger),
        "GD_TEST_DB_USER": db.server.user,
        "GAMEDAY_DB_PASSWORD": db.server.password,
    }


def test_run_holds_then_releases_and_keeps_the_password_out(
    db: Db, ledger_path: Path, tmp_path: Path, write_experiment: Callable[..., Path]
) -> None:
    headroom = {
        "type": "probe",
        "name": "headroom-during",
        "provider": _provider("connection_headroom", "chaos_ext.db.probes", db.args()),
    }
    path = write_experiment(_experiment(db, [headroom], hold=60))
    journal_path = tmp_path / "journal.json"
    result = subprocess.run(
        # the headroom hypothesis is checked before the hold only (during it, it is 5)
        gameday_argv(
            "run",
            "--hypothesis-strategy",
            "before-method-only",
            "--journal",
            str(journal_path),
            str(path),
        ),
        env=_env(ledger_path, db),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    journal_text = journal_path.read_text()
    journal = json.loads(journal_text)
    action, probe = journal["run"]
    assert action["status"] == "succeeded", action
    assert action["output"]["free_after"] == 5
    assert probe["output"] == 5  # seen from a second connection while held
    assert journal["rollbacks"][0]["output"]["undone"] == 1
    assert journal["gameday"]["outcome"] == "held"
    # the password is nowhere: journal, CLI output, ledger file
    assert PASSWORD not in journal_text
    assert PASSWORD not in output
    raw = b"".join(p.read_bytes() for p in ledger_path.parent.glob(ledger_path.name + "*"))
    assert PASSWORD.encode() not in raw
    wait_for(lambda: db.client_count() == 1, 10, "the connection count back at its baseline")


def test_sigkill_of_the_runner_then_gameday_rollback(
    db: Db, ledger_path: Path, tmp_path: Path, write_experiment: Callable[..., Path]
) -> None:
    sleep = {
        "type": "probe",
        "name": "wait-in-the-middle",
        "provider": {"type": "process", "path": "sleep", "arguments": "60", "timeout": 90},
    }
    path = write_experiment(_experiment(db, [sleep], hold=120))
    expected = db.free_for_user() - 5
    runner = subprocess.Popen(
        gameday_argv("run", "--journal", str(tmp_path / "j.json"), str(path)),
        env=_env(ledger_path, db),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(lambda: db.client_count() == 1 + expected, 60, "the connections held")
        (entry,) = Ledger(ledger_path).open_entries()
        # kill -9 the runner and everything in its process group (the sleep too)
        os.killpg(runner.pid, signal.SIGKILL)
        runner.wait(timeout=10)
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait(timeout=10)
    time.sleep(1)
    # the runner is gone; the holder (its own session) still holds every connection
    assert db.client_count() == 1 + expected
    (holder,) = find_helpers(entry.id)
    # issue 22, defect 7: the secret never reaches the holder's environment
    assert PASSWORD.encode() not in Path(f"/proc/{holder}/environ").read_bytes()
    # issue 22, point 1: the entry names the server it holds connections to
    assert entry.identity is not None
    server = entry.identity["database"]["server"]
    assert server.get("system_identifier") or server.get("datadir"), server

    result = subprocess.run(
        gameday_argv("rollback"),
        env=cli_env(ledger_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ledger is clean" in result.stderr
    wait_for(lambda: db.client_count() == 1, 10, "no held connection left on the server")
    assert find_helpers(entry.id) == []
    assert Ledger(ledger_path).open_entries() == []
