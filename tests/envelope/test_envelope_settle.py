"""Unsteady runs never count; --settle waits for the steady state before each magnitude.

The system is out of tolerance before any fault when someone else already
holds dnsmasq's 20 TCP slots: here the test itself does, with plain sockets
(the environment's condition, not a fault of the run, so not in the ledger).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.envelope_app import DnsBackedApp, dns_experiment
from support.gameday_cli import run_gameday
from support.harness import wait_for

from chaos_ext._core.ledger import Ledger
from chaos_ext._products.sandbox.servers.dnsmasq import Dnsmasq

pytestmark = pytest.mark.slow

OUT_OF_TOLERANCE_FOR = 8.0  # seconds the slots stay taken in the settle test


@contextlib.contextmanager
def slots_taken(dns: Dnsmasq, seconds: float | None = None) -> Iterator[list[socket.socket]]:
    """20 idle TCP connections to dnsmasq (all its children), for ``seconds`` or the block."""
    held = [socket.create_connection((dns.address, dns.port), timeout=3) for _ in range(20)]
    wait_for(lambda: len(dns.children()) >= 20, 10, "dnsmasq's 20 children busy")

    def release() -> None:
        for conn in held:
            conn.close()

    timer = threading.Timer(seconds, release) if seconds is not None else None
    if timer:
        timer.start()
    try:
        yield held
    finally:
        if timer:
            timer.cancel()
        release()


def _experiment(tmp_path: Path, app: DnsBackedApp, dns: Dnsmasq, envelope: dict[str, Any]) -> Path:
    path = tmp_path / "dns.json"
    path.write_text(json.dumps(dns_experiment(app, dns, envelope)))
    return path


def test_a_system_never_steady_stops_the_search_with_nothing_injected(
    tmp_path: Path, dns_server: Dnsmasq, fragile_app: DnsBackedApp, clean_ledger: Path
) -> None:
    path = _experiment(
        tmp_path, fragile_app, dns_server, {"vary": "hold-dns-tcp.connections=1..40", "repeats": 1}
    )
    with slots_taken(dns_server):
        done = run_gameday(tmp_path, clean_ledger, "envelope", str(path), "-o", "out", timeout=300)
    assert done.returncode == 4, done.stderr[-3000:]
    doc = json.loads((tmp_path / "out" / "envelope.json").read_text())
    assert [r["outcome"] for r in doc["runs"]] == ["unsteady"] * 3
    assert {r["magnitude"] for r in doc["runs"]} == {1}  # the same magnitude, retried
    assert all("app-median-ms" in r["reason"] for r in doc["runs"])
    result = doc["result"]
    assert (result["kind"], result["counted"], result["held"], result["deviated"]) == (
        "incomplete",
        0,
        None,
        None,
    )
    assert result["stopped"]["cause"] == "unsteady"
    assert Ledger(clean_ledger).history() == []  # nothing was ever injected


def test_settle_waits_for_the_steady_state_and_the_run_counts(
    tmp_path: Path, dns_server: Dnsmasq, fragile_app: DnsBackedApp, clean_ledger: Path
) -> None:
    path = _experiment(
        tmp_path,
        fragile_app,
        dns_server,
        {"vary": "hold-dns-tcp.connections=15..25", "repeats": 0, "settle_seconds": 60},
    )
    with slots_taken(dns_server, OUT_OF_TOLERANCE_FOR):
        done = run_gameday(tmp_path, clean_ledger, "envelope", str(path), "-o", "out", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads((tmp_path / "out" / "envelope.json").read_text())
    assert doc["settings"]["settle_seconds"] == 60
    assert "unsteady" not in {r["outcome"] for r in doc["runs"]}
    first = json.loads((tmp_path / "out" / doc["runs"][0]["journal"]).read_text())
    settle = first["gameday"]["settle"]
    assert settle["settled"] and settle["attempts"] >= 2
    assert settle["waited_s"] >= OUT_OF_TOLERANCE_FOR / 2
    assert (doc["result"]["held"], doc["result"]["deviated"]) == (19, 20)
