"""A damaged, emptied or deleted ledger never says "no open faults" (issue 22, defect 2).

The campaign's steps, with a real dnsmasq: a run holds 25 TCP connections,
is killed, then the ledger file is damaged. Every command must then refuse
and list the hold, the connections must stay counted by ``ss`` (the kernel's
view, not the ledger's) until ``gameday ledger --repair`` and
``gameday rollback`` have run, and then be gone.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from support.dns_checks import established, tcp_resolves
from support.harness import cli_env, gameday_argv, wait_for

from chaos_ext._core.ledger import Ledger
from chaos_ext._products.sandbox.servers.dnsmasq import Dnsmasq

pytestmark = pytest.mark.orphans

CONNECTIONS = 25


def _page(path: Path, name: str | None) -> int:
    """The 1-based page number of index ``name``'s root, or the last page."""
    if name is None:
        size = int.from_bytes(path.read_bytes()[16:18], "big")
        return path.stat().st_size // size
    with closing(sqlite3.connect(path)) as db:
        return int(
            db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
        )


def _scribble(path: Path, page: int) -> None:
    """2,000 random bytes at the start of ``page``, as the campaign did."""
    size = int.from_bytes(path.read_bytes()[16:18], "big")
    with path.open("r+b") as handle:
        handle.seek((page - 1) * size)
        handle.write(os.urandom(2000))


def damage_index(path: Path) -> None:
    _scribble(path, _page(path, "entries_state"))


def damage_last_page(path: Path) -> None:
    _scribble(path, _page(path, None))


def truncate(path: Path) -> None:
    path.write_bytes(b"")


def delete(path: Path) -> None:
    path.unlink()


def _experiment(server: Dnsmasq) -> dict[str, Any]:
    hold = {
        "server": server.address,
        "port": server.port,
        "connections": CONNECTIONS,
        "hold_seconds": 240,
    }
    return {
        "title": "a DNS hold whose ledger is then damaged",
        "description": "issue 22, defect 2",
        "method": [
            {
                "type": "action",
                "name": "hold",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.dns.actions",
                    "func": "saturate_dnsmasq_tcp",
                    "arguments": hold,
                },
            },
            {
                "type": "probe",
                "name": "wait",
                "provider": {
                    "type": "process",
                    "path": "sleep",
                    "arguments": "120",
                    "timeout": 150,
                },
            },
        ],
    }


@pytest.mark.parametrize("damage", [damage_index, damage_last_page, truncate, delete])
def test_a_damaged_ledger_refuses_lists_the_hold_and_is_repaired(
    damage: Callable[[Path], None],
    dns_server: Dnsmasq,
    dns_ledger: Path,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    path = write_experiment(_experiment(dns_server))
    runner = subprocess.Popen(
        gameday_argv("run", "--journal", str(tmp_path / "j.json"), str(path)),
        env=cli_env(dns_ledger),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: established(dns_server.port) == CONNECTIONS, 90, "25 connections held")
        (entry,) = Ledger(dns_ledger).open_entries()
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)
    damage(dns_ledger)

    listed = gameday("ledger")
    assert listed.returncode == 2, listed.stderr
    assert "no open faults" not in listed.stderr
    assert entry.id in listed.stderr and "dnsmasq-tcp-hold" in listed.stderr
    rollback = gameday("rollback")
    assert rollback.returncode == 2, rollback.stderr
    assert "nothing to roll back" not in rollback.stderr and entry.id in rollback.stderr
    quiet = write_experiment({"title": "quiet", "description": "-", "method": []}, "q.json")
    refused = gameday("run", "--journal", "q.json", str(quiet))
    assert refused.returncode == 2, refused.stderr
    assert "not starting" in refused.stderr
    assert established(dns_server.port) == CONNECTIONS  # nothing was lost track of, or undone

    repaired = gameday("ledger", "--repair")
    assert repaired.returncode == 0, repaired.stderr
    assert "rebuilt the database from the event log" in repaired.stderr
    result = gameday("rollback")
    assert result.returncode == 0, result.stderr
    assert entry.id not in {e.id for e in Ledger(dns_ledger).open_entries()}
    wait_for(lambda: established(dns_server.port) == 0, 10, "every connection closed")
    assert tcp_resolves(dns_server, timeout=2)
    assert gameday("ledger", "--verify").returncode == 0
