"""Bad input and unreachable servers: one clear line, nothing held, nothing left open."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.dbtest import PASSWORD, Db

from chaos_ext._core.ledger import Ledger
from chaos_ext.db.actions import exhaust_connections
from chaos_ext.db.errors import DatabaseError
from chaos_ext.db.probes import connection_headroom
from chaos_ext.errors import InvalidArgument

SECRETS_USER_ONLY = {"user": "gameday"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections (kernel backlog) but never says a word."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield int(sock.getsockname()[1])


def _assert_one_line_nothing_held(exc: BaseException, db: Db, ledger_path: Path) -> str:
    message = str(exc)
    assert "\n" not in message
    assert PASSWORD not in message
    assert db.client_count() == 1
    entries = Ledger(ledger_path).history()
    assert all(e.state == "closed" for e in entries)  # recorded, then undone at once
    return message


def test_wrong_password(db: Db, ledger_path: Path) -> None:
    secrets = {"user": db.server.user, "password": "not-" + PASSWORD}
    with pytest.raises(DatabaseError) as caught:
        exhaust_connections(**db.args(target="max"), secrets=secrets)
    message = _assert_one_line_nothing_held(caught.value, db, ledger_path)
    assert "not-" + PASSWORD not in message
    expected = {
        "postgresql": 'password authentication failed for user "gameday"',
        "mysql": "(1045) Access denied for user 'gameday'",
    }[db.engine]
    assert expected in message
    assert "check the user/password secrets" in message


def test_nothing_listening(db: Db, ledger_path: Path) -> None:
    args = db.args(target="max") | {"port": _free_port()}
    with pytest.raises(DatabaseError) as caught:
        exhaust_connections(**args, secrets=db.secrets)
    message = _assert_one_line_nothing_held(caught.value, db, ledger_path)
    assert "Connection refused" in message
    assert "check host and port" in message


def test_unreachable_server_times_out(db: Db, ledger_path: Path, silent_port: int) -> None:
    args = db.args(target="max", connect_timeout_seconds=2) | {"port": silent_port}
    started = time.monotonic()
    with pytest.raises(DatabaseError) as caught:
        exhaust_connections(**args, secrets=db.secrets)
    elapsed = time.monotonic() - started
    message = _assert_one_line_nothing_held(caught.value, db, ledger_path)
    assert "no answer within 2 s" in message
    assert 1.5 < elapsed < 15


def test_headroom_probe_reports_login_errors(db: Db) -> None:
    with pytest.raises(DatabaseError, match="check the user/password secrets"):
        connection_headroom(**db.args(), secrets={"user": db.server.user, "password": "nope"})


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"engine": "oracle"}, "engine: 'oracle' is not supported"),
        ({"target": "max-5"}, "target: 'max-5' is not a number of connections"),
        ({"target": "most"}, "target: 'most'"),
        ({"target": 0}, "target: 0 is outside"),
        ({"target": "max-minus-"}, "target: 'max-minus-'"),
        ({"hold_seconds": 0}, "hold_seconds: 0 is outside"),
        ({"open_concurrency": 1000}, "open_concurrency: 1000 is outside"),
        ({"host": "db host"}, "host: 'db host' is not a host name"),
        ({"database": "x;drop"}, "database: 'x;drop' is not a database name"),
    ],
)
def test_invalid_arguments_touch_nothing(
    change: dict[str, Any], expected: str, ledger_path: Path
) -> None:
    arguments = {"engine": "postgresql", "port": _free_port(), "target": "max", **change}
    with pytest.raises(InvalidArgument, match=expected.replace("(", r"\(")):
        exhaust_connections(**arguments, secrets={"user": "u", "password": "p"})
    assert not ledger_path.exists() or Ledger(ledger_path).history() == []


def test_missing_user_says_where_credentials_go(ledger_path: Path) -> None:
    with pytest.raises(InvalidArgument, match=r'"secrets": \["db"\]'):
        exhaust_connections(engine="mysql", port=_free_port(), secrets={"password": "p"})


def _experiment(arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "title": "exhaust",
        "description": "validate only",
        "secrets": {"db": {"user": "app", "password": {"type": "env", "key": "GD_TEST_DB_PW"}}},
        "method": [
            {
                "type": "action",
                "name": "exhaust",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.db.actions",
                    "func": "exhaust_connections",
                    "arguments": arguments,
                    "secrets": ["db"],
                },
            }
        ],
    }


@pytest.mark.parametrize(
    ("arguments", "code", "expected"),
    [
        ({"engine": "mysql", "target": "max-minus-10"}, 0, "valid:"),
        ({"engine": "postgresql", "target": 25}, 0, "valid:"),
        ({"engine": "mysql", "target": "max-10"}, 3, "target: 'max-10' is not a number"),
        ({"engine": "sqlite", "target": "max"}, 3, "engine: 'sqlite' is not supported"),
        ({"engine": "mysql", "target": 1.5}, 3, "target: expected"),
    ],
)
def test_gameday_validate_catches_bad_targets(
    arguments: dict[str, Any],
    code: int,
    expected: str,
    write_experiment: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    path = write_experiment(_experiment(arguments))
    # the secret's environment variable is not set here: validation does not need it
    monkeypatch.delenv("GD_TEST_DB_PW", raising=False)
    result = gameday("validate", str(path))
    assert result.returncode == code, result.stdout + result.stderr
    output = " ".join((result.stdout + result.stderr).split())
    assert expected in output
    if code:
        assert "method[0].provider.arguments" in output
    assert json.loads(path.read_text())  # untouched
