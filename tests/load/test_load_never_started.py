"""A load whose fault never started closes cleanly and blocks nothing (issue 22, defect 3).

The campaign's trigger was an https URL with a ``ca_file`` that is not PEM:
the entry was written, the helper failed before ``meta.json`` existed, and
from then on the undo failed, every ``gameday rollback`` exited 2 and every
``gameday run`` refused to start. The CA file here is a real one: Mozilla's
ISRG Root X1 from Debian's ``ca-certificates`` (MPL-2.0), converted to DER
with ``openssl x509 -outform der`` as many CA download pages hand it out.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.harness import cli_env, gameday_argv
from support.servers.http_target import HttpTarget

from chaos_ext._core.ledger import Ledger
from chaos_ext.errors import InvalidArgument
from chaos_ext.load.actions import drive_http_load
from chaos_ext.load.errors import LoadError

ISRG_PEM = Path("/usr/share/ca-certificates/mozilla/ISRG_Root_X1.crt")


@pytest.fixture
def der_ca(tmp_path: Path) -> Path:
    der = tmp_path / "isrg-root-x1.der"
    subprocess.run(
        ["openssl", "x509", "-in", str(ISRG_PEM), "-outform", "der", "-out", str(der)],
        check=True,
        timeout=30,
    )
    return der


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield int(sock.getsockname()[1])


def _experiment(**arguments: Any) -> dict[str, Any]:
    return {
        "title": "a load that cannot start",
        "description": "issue 22, defect 3",
        "method": [
            {
                "type": "action",
                "name": "load",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.load.actions",
                    "func": "drive_http_load",
                    "arguments": arguments,
                },
            },
        ],
        "rollbacks": [
            {
                "type": "action",
                "name": "stop-load",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.load.actions",
                    "func": "stop_http_load",
                },
            },
        ],
    }


def _quiet() -> dict[str, Any]:
    return {"title": "quiet", "description": "-", "method": []}


def test_a_der_ca_file_is_refused_before_anything_is_recorded(
    der_ca: Path, no_leaked_loads: Path
) -> None:
    with pytest.raises(InvalidArgument, match="not a PEM certificate bundle"):
        drive_http_load(
            urls=["https://127.0.0.1:9/"], rate=5, duration_seconds=2, ca_file=str(der_ca)
        )
    assert Ledger(no_leaked_loads).history() == []


def test_the_campaign_steps_leave_later_runs_free(
    der_ca: Path,
    no_leaked_loads: Path,
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    bad = write_experiment(
        _experiment(urls=["https://127.0.0.1:9/"], rate=5, duration_seconds=2, ca_file=str(der_ca))
    )
    first = gameday("run", "--journal", "j.json", str(bad))
    assert first.returncode == 2, first.stderr
    assert "not a PEM certificate bundle" in first.stderr
    assert gameday("rollback").returncode == 0
    quiet = write_experiment(_quiet(), "quiet.json")
    later = gameday("run", "--journal", "q.json", str(quiet))
    assert later.returncode == 0, later.stderr


def test_a_helper_that_fails_after_the_entry_closes_it_at_once(
    target: HttpTarget,
    taken_port: int,
    no_leaked_loads: Path,
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """The same window without the argument check: /metrics cannot bind, before meta.json."""
    with pytest.raises(LoadError, match="did not start"):
        drive_http_load(urls=[target.url], rate=5, duration_seconds=2, metrics_port=taken_port)
    (entry,) = Ledger(no_leaked_loads).history()
    assert entry.state == "closed"
    assert entry.note is not None and "never started" in entry.note
    sent = target.stats()["requests"]  # a worker may have sent one before /metrics failed
    time.sleep(1.0)
    assert target.stats()["requests"] == sent
    quiet = write_experiment(_quiet(), "quiet.json")
    assert gameday("run", "--journal", "q.json", str(quiet)).returncode == 0


@pytest.mark.parametrize(
    "failpoint",
    ["http-load.after-entry=kill", "http-load.after-entry=term", "http-load.after-entry=int"],
)
def test_a_run_stopped_between_entry_and_start_leaves_a_closable_entry(
    failpoint: str,
    target: HttpTarget,
    no_leaked_loads: Path,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """SIGKILL, SIGTERM or SIGINT right after the entry is written, before the helper exists."""
    path = write_experiment(_experiment(urls=[target.url], rate=5, duration_seconds=5))
    env = {**cli_env(no_leaked_loads), "GAMEDAY_FAILPOINTS": failpoint}
    run = subprocess.run(
        gameday_argv("run", "--journal", "j.json", str(path)),
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == (-9 if failpoint.endswith("kill") else 2), run.stderr
    if not failpoint.endswith("kill"):
        journal = json.loads((tmp_path / "j.json").read_text())
        assert journal["gameday"]["outcome"] == "interrupted"
    result = gameday("rollback")
    assert result.returncode == 0, result.stderr
    assert Ledger(no_leaked_loads).open_entries() == []
    assert target.stats()["requests"] == 0
    quiet = write_experiment(_quiet(), "quiet.json")
    assert gameday("run", "--journal", "q.json", str(quiet)).returncode == 0
