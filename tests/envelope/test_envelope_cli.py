"""`gameday envelope` on the command line: bad input injects nothing; signals roll back.

The signal tests hold real TCP connections on a real dnsmasq (a 30 s pause
keeps the fault in place) and interrupt or kill the search in the middle of
its first run.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.dns_checks import tcp_resolves
from support.envelope_app import DnsBackedApp
from support.harness import cli_env, gameday_argv, signal_and_collect, wait_for

from chaos_ext._core.helper import find_helpers
from chaos_ext._core.ledger import Ledger
from chaos_ext._products.sandbox.servers.dnsmasq import Dnsmasq

Gameday = Callable[..., subprocess.CompletedProcess[str]]


def experiment(server: str, port: int, url: str, pause: float = 0) -> dict[str, Any]:
    hold: dict[str, Any] = {
        "type": "action",
        "name": "hold-dns-tcp",
        "provider": {
            "type": "python",
            "module": "chaos_ext.dns.actions",
            "func": "saturate_dnsmasq_tcp",
            "arguments": {"server": server, "port": port, "connections": 5, "hold_seconds": 120},
        },
    }
    if pause:
        hold["pauses"] = {"after": pause}
    return {
        "version": "1.0.0",
        "title": "envelope cli",
        "description": "d",
        "steady-state-hypothesis": {
            "title": "fast",
            "probes": [
                {
                    "type": "probe",
                    "name": "app-median-ms",
                    "tolerance": {"type": "range", "range": [0, 300]},
                    "provider": {
                        "type": "python",
                        "module": "support.envelope_app",
                        "func": "median_request_ms",
                        "arguments": {"url": url},
                    },
                }
            ],
        },
        "method": [hold],
        "rollbacks": [],
    }


@pytest.fixture
def offline(write_experiment: Callable[..., Path]) -> Path:
    """An experiment whose targets do not exist: only validation may touch it."""
    return write_experiment(experiment("127.0.0.1", 9, "http://127.0.0.1:9/work"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--vary", "hold-dns-tcp.connections"], "is not ACTIVITY.ARGUMENT=LOW..HIGH"),
        (["--vary", "nope.connections=1..40"], "no method activity named 'nope'"),
        (["--vary", "hold-dns-tcp.connections=0..40"], "connections: 0 is outside"),
        (["--vary", "hold-dns-tcp.connections=1..40", "--max-runs", "5"], "may need 12 runs"),
        (["--vary", "hold-dns-tcp.connections=1..40", "--resolution", "0"], "resolution"),
        ([], "what to vary"),
    ],
)
def test_bad_input_exits_3_and_injects_nothing(
    gameday: Gameday, offline: Path, ledger_path: Path, args: list[str], message: str
) -> None:
    done = gameday("envelope", str(offline), "-o", "out", *args)
    assert done.returncode == 3, done.stderr
    assert message in done.stderr
    assert not ledger_path.exists() or Ledger(ledger_path).history() == []
    assert not (offline.parent / "out").exists()


def test_dry_run_prints_the_plan(gameday: Gameday, offline: Path, ledger_path: Path) -> None:
    done = gameday(
        "envelope",
        str(offline),
        "--vary",
        "hold-dns-tcp.connections=1..40",
        "--repeats",
        "1",
        "--dry-run",
    )
    assert done.returncode == 0, done.stderr
    assert "harsh end (blast radius) 40" in done.stderr
    assert "at most 10 runs (cap 20)" in done.stderr
    assert "nothing was injected" in done.stderr
    assert not ledger_path.exists() or Ledger(ledger_path).history() == []


def test_an_existing_envelope_is_not_overwritten(gameday: Gameday, offline: Path) -> None:
    out = offline.parent / "out"
    out.mkdir()
    (out / "envelope.json").write_text("{}")
    done = gameday(
        "envelope", str(offline), "--vary", "hold-dns-tcp.connections=1..40", "-o", str(out)
    )
    assert done.returncode == 3 and "already holds an envelope.json" in done.stderr


def test_help_teaches_the_search_and_its_safety(gameday: Gameday) -> None:
    done = gameday("envelope", "--help")
    assert done.returncode == 0
    for text in ("blast radius", "--max-runs", "noisy", "unsteady", "extensions", "exit code"):
        assert text in done.stdout, text


def _start(ledger: Path, path: Path, tmp: Path) -> subprocess.Popen[str]:
    argv = gameday_argv(
        "envelope",
        str(path),
        "--vary",
        "hold-dns-tcp.connections=1..40",
        "--repeats",
        "1",
        "-o",
        str(tmp / "out"),
    )
    return subprocess.Popen(
        argv,
        env=cli_env(ledger),
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _held(ledger: Path) -> bool:
    entries = Ledger(ledger).open_entries() if ledger.exists() else []
    return any(find_helpers(e.id) for e in entries)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_rolls_the_run_back_and_ends_the_search(
    sig: signal.Signals,
    tmp_path: Path,
    dns_server: Dnsmasq,
    fragile_app: DnsBackedApp,
    clean_ledger: Path,
    write_experiment: Callable[..., Path],
) -> None:
    path = write_experiment(experiment(dns_server.address, dns_server.port, fragile_app.url, 30))
    proc = _start(clean_ledger, path, tmp_path)
    wait_for(lambda: _held(clean_ledger), 60, "the first run's connections held")
    output = signal_and_collect(proc, sig, f"the search ignored {sig.name}")
    assert proc.returncode == 2, output
    doc = json.loads((tmp_path / "out" / "envelope.json").read_text())
    assert [r["outcome"] for r in doc["runs"]] == ["interrupted"]  # no second run started
    assert doc["status"] == "stopped"
    assert doc["result"]["kind"] == "incomplete"
    assert doc["result"]["stopped"]["cause"] == "interrupted"
    assert Ledger(clean_ledger).open_entries() == []
    assert tcp_resolves(dns_server, timeout=2)


@pytest.mark.slow
def test_after_sigkill_gameday_rollback_undoes_the_run(
    tmp_path: Path,
    dns_server: Dnsmasq,
    fragile_app: DnsBackedApp,
    clean_ledger: Path,
    write_experiment: Callable[..., Path],
    gameday: Gameday,
) -> None:
    path = write_experiment(experiment(dns_server.address, dns_server.port, fragile_app.url, 30))
    proc = _start(clean_ledger, path, tmp_path)
    wait_for(lambda: _held(clean_ledger), 60, "the first run's connections held")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    assert _held(clean_ledger)  # the runner is dead, its fault is still in place and recorded
    doc = json.loads((tmp_path / "out" / "envelope.json").read_text())
    assert doc["status"] == "running" and doc["runs"] == []
    done = gameday("rollback")
    assert done.returncode == 0, done.stderr
    assert Ledger(clean_ledger).open_entries() == []
    assert not _held(clean_ledger)
    assert tcp_resolves(dns_server, timeout=2)
