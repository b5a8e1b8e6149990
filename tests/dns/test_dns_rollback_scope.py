"""One run's rollback never releases another live run's DNS hold (issue 22, defect 5).

Two real ``gameday run`` processes hold connections to the same dnsmasq;
run B's rollback ``release_dnsmasq_tcp(server, port)`` must release only B's.
Connections are counted by ``ss``, not by the ledger.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.dns_checks import established
from support.harness import cli_env, gameday_argv, wait_for

from chaos_ext._core.ledger import Ledger
from chaos_ext._products.sandbox.servers.dnsmasq import Dnsmasq


def _action(func: str, **arguments: Any) -> dict[str, Any]:
    return {
        "type": "action",
        "name": func.replace("_", "-"),
        "provider": {
            "type": "python",
            "module": "chaos_ext.dns.actions",
            "func": func,
            "arguments": arguments,
        },
    }


def _run(server: Dnsmasq, connections: int, wait_s: int, **release: Any) -> dict[str, Any]:
    where = {"server": server.address, "port": server.port}
    return {
        "title": f"hold {connections}",
        "description": "issue 22, defect 5",
        "method": [
            _action("saturate_dnsmasq_tcp", **where, connections=connections, hold_seconds=120),
            {
                "type": "probe",
                "name": "pause",
                "provider": {
                    "type": "process",
                    "path": "sleep",
                    "arguments": str(wait_s),
                    "timeout": wait_s + 30,
                },
            },
        ],
        "rollbacks": [_action("release_dnsmasq_tcp", **where, **release)],
    }


def test_run_b_releases_only_its_own_hold_and_a_dead_runs_only_when_asked(
    dns_server: Dnsmasq,
    dns_ledger: Path,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    run_a = subprocess.Popen(
        gameday_argv(
            "run",
            "--journal",
            "a.json",
            str(write_experiment(_run(dns_server, 8, 90), "a.json.in")),
        ),
        env=cli_env(dns_ledger),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: established(dns_server.port) == 8, 60, "run A's 8 connections")
        b = gameday(
            "run", "--journal", "b.json", str(write_experiment(_run(dns_server, 4, 1), "b.json.in"))
        )
        assert b.returncode == 0, b.stderr
        released = json.loads((tmp_path / "b.json").read_text())["rollbacks"][0]["output"]
        assert released["undone"] == 1
        assert [a["ledger_id"] for a in released["left_alone"]] == [
            e.id for e in Ledger(dns_ledger).open_entries()
        ]  # A's hold is listed, not released
        assert established(dns_server.port) == 8  # A's hold is untouched
        (a_entry,) = Ledger(dns_ledger).open_entries()
        assert a_entry.owner_pid == run_a.pid
    finally:
        run_a.send_signal(signal.SIGKILL)
        run_a.wait(timeout=10)
    # A is dead now: a run's rollback takes its hold only when asked to
    c = gameday(
        "run",
        "--no-recover",
        "--journal",
        "c.json",
        str(write_experiment(_run(dns_server, 2, 1), "c.json.in")),
    )
    assert c.returncode == 2  # --no-recover: A's leftover is there, the run refuses
    d_run = _run(dns_server, 2, 1, include_dead_runs=True)
    d_run["method"] = d_run["method"][1:]  # no hold of its own: only the rollback
    # plain `chaos run` (no start-up recovery): only the explicit argument releases it
    plain = subprocess.run(
        [
            str(Path(sys.executable).parent / "chaos"),
            "--no-version-check",
            "run",
            str(write_experiment(d_run, "d.json")),
        ],
        env=cli_env(dns_ledger),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert plain.returncode == 0, plain.stdout + plain.stderr
    wait_for(lambda: established(dns_server.port) == 0, 10, "A's connections released")
    assert Ledger(dns_ledger).open_entries() == []
