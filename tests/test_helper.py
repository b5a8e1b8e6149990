"""Helper processes: tagged, found again from /proc, and given no secrets."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest

from chaos_ext._core import helper as _helper
from chaos_ext._core import procfs as _procfs
from chaos_ext._core.failpoint import FailpointHit
from chaos_ext.errors import ChaosExtError


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_helper_environment_carries_the_token_but_not_the_runners_secrets(
    monkeypatch: pytest.MonkeyPatch, ledger_path: Path
) -> None:
    monkeypatch.setenv("DB_PASSWORD", "hunter2-do-not-leak")
    # issue 22: a GAMEDAY_-prefixed secret used to be passed through by prefix
    monkeypatch.setenv("GAMEDAY_DB_PASSWORD", "hunter3-do-not-leak")
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    handle = _helper.start_helper(
        module="support.port_holder",
        payload={"port": _free_port(), "seconds": 30},
        token="unit-token-1",
        ready_timeout=20,
    )
    try:
        environ = Path(f"/proc/{handle.pid}/environ").read_bytes().split(b"\0")
        assert b"GAMEDAY_HELPER_TOKEN=unit-token-1" in environ
        assert b"LANG=C.UTF-8" in environ  # on the allowlist
        assert not [item for item in environ if b"hunter" in item]
        names = {item.split(b"=", 1)[0].decode() for item in environ if item}
        assert names <= _helper.HELPER_ENV_ALLOWLIST | {"GAMEDAY_HELPER_TOKEN"}
        assert _helper.find_helpers("unit-token-1") == [handle.pid]
    finally:
        assert _helper.stop_helpers("unit-token-1") == 1
    assert _helper.find_helpers("unit-token-1") == []
    assert _helper.stop_helpers("unit-token-1") == 0  # idempotent


def test_a_helper_that_fails_reports_its_error_and_is_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(ChaosExtError, match="Address already in use"):
            _helper.start_helper(
                module="support.port_holder",
                payload={"port": port, "seconds": 30},
                token="unit-token-2",
                ready_timeout=20,
            )
    assert _helper.find_helpers("unit-token-2") == []


def test_a_helper_that_crashes_before_ready_shows_its_stderr(
    monkeypatch: pytest.MonkeyPatch, ledger_path: Path
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    with pytest.raises(ChaosExtError, match=r"No module named support\.no_such_helper"):
        _helper.start_helper(
            module="support.no_such_helper", payload={}, token="unit-token-3", ready_timeout=20
        )
    assert _helper.helper_log("unit-token-3").parent == ledger_path.parent / "helpers"


def test_a_start_that_fails_after_the_fork_ends_the_helper_by_its_pid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rule: every exit of start_helper that does not hand the helper over ends it, by
    the pid it holds. Right after exec, /proc/<pid>/environ may not show the token yet: under
    stress-ng the crash matrix's dnsmasq-tcp-hold mid-apply cell (a failure right after the
    fork) had its undo find no helper by token, and 5 TCP connections stayed held."""
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    monkeypatch.setenv("GAMEDAY_FAILPOINTS", "helper.started=raise")
    port = _free_port()
    started: list[int] = []
    real_popen = _helper.subprocess.Popen

    def popen(*args: Any, **kwargs: Any) -> Any:
        proc = real_popen(*args, **kwargs)
        started.append(proc.pid)
        return proc

    monkeypatch.setattr(_helper.subprocess, "Popen", popen)
    with pytest.raises(FailpointHit):
        _helper.start_helper(
            module="support.port_holder",
            payload={"port": port, "seconds": 30},
            token="unit-token-4",
            ready_timeout=20,
        )
    assert started, "no helper was started"
    assert not _procfs.alive(started[0]), "the helper outlived its failed start"
    time.sleep(1.0)  # had it lived, it would be listening by now
    with socket.socket() as probe:
        probe.settimeout(1)
        assert probe.connect_ex(("127.0.0.1", port)) != 0
