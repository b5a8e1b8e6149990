"""saturate_dnsmasq_tcp against a real dnsmasq 2.90, which serves TCP with 20 children at most."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.dns_checks import seconds_until, tcp_resolves
from support.harness import cli_env, gameday_argv, wait_for

from chaos_ext._core import procfs as _procfs
from chaos_ext._core.helper import find_helpers, stop_helpers
from chaos_ext._core.ledger import Ledger
from chaos_ext._products.sandbox.servers.dnsmasq import Dnsmasq
from chaos_ext.dns._helper_undo import no_holder_note
from chaos_ext.dns.actions import release_dnsmasq_tcp, saturate_dnsmasq_tcp
from chaos_ext.dns.errors import DnsError
from chaos_ext.dns.probes import dns_resolution_stats, dnsmasq_child_processes
from chaos_ext.errors import InvalidArgument


def _stats(server: Dnsmasq, protocol: str, samples: int = 3) -> dict[str, Any]:
    return dns_resolution_stats(
        server.address,
        "www.example.test",
        port=server.port,
        protocol=protocol,
        samples=samples,
        timeout_seconds=0.5,
    )


@pytest.mark.rolls_back("dnsmasq-tcp-hold")
def test_holding_20_connections_fails_tcp_not_udp_and_undo_restores_tcp(
    dns_server: Dnsmasq, dns_ledger: Path
) -> None:
    assert _stats(dns_server, "tcp")["timeout_ratio"] == 0.0

    held = saturate_dnsmasq_tcp(
        dns_server.address, port=dns_server.port, connections=20, hold_seconds=60
    )
    assert (held["opened"], held["held"], held["failed"]) == (20, 20, 0)
    wait_for(lambda: len(dns_server.children()) == 20, 5, "20 dnsmasq TCP children")
    assert dnsmasq_child_processes(port=dns_server.port)["children"] == 20

    tcp = _stats(dns_server, "tcp")
    assert tcp["timeout_ratio"] == 1.0
    assert tcp["p50_ms"] == pytest.approx(500.0, rel=0.001)  # HdrHistogram: 3 significant digits
    udp = _stats(dns_server, "udp", samples=10)
    assert udp["answered"] == 10 and udp["timeouts"] == 0 and udp["p99_ms"] < 100

    started = time.monotonic()
    released = release_dnsmasq_tcp(server=dns_server.address, port=dns_server.port)
    seconds_until(lambda: tcp_resolves(dns_server, timeout=0.2), 5)
    # released by the undo, not by the 60 s hold's end: 3 s is 20x short of the hold, and leaves
    # a busy 2-core machine room for the helper's SIGTERM and dnsmasq's children to exit
    assert time.monotonic() - started < 3.0, "TCP resolution not back within 3 s of the undo"
    assert released["undone"] == 1 and released["faults"][0]["ledger_id"] == held["ledger_id"]
    assert find_helpers(held["ledger_id"]) == []
    assert Ledger(dns_ledger).open_entries() == []
    assert release_dnsmasq_tcp()["undone"] == 0  # idempotent


def test_nineteen_connections_leave_tcp_working(dns_server: Dnsmasq, dns_ledger: Path) -> None:
    saturate_dnsmasq_tcp(dns_server.address, port=dns_server.port, connections=19, hold_seconds=30)
    wait_for(lambda: len(dns_server.children()) == 19, 5, "19 dnsmasq TCP children")
    assert _stats(dns_server, "tcp")["answered"] == 3
    release_dnsmasq_tcp()


def test_one_query_per_connection_then_idle(dns_server: Dnsmasq, dns_ledger: Path) -> None:
    held = saturate_dnsmasq_tcp(
        dns_server.address,
        port=dns_server.port,
        connections=25,
        hold_seconds=30,
        query_name="kubernetes.default.svc.cluster.local",
        connect_timeout_seconds=1.0,
    )
    # 20 children answer; 5 connections wait in dnsmasq's accept queue, unanswered
    assert (held["opened"], held["answered"], held["held"]) == (25, 20, 25)
    queries = dns_server.query_counts()[("A", "kubernetes.default.svc.cluster.local")]
    assert queries == 20
    assert not tcp_resolves(dns_server)
    release_dnsmasq_tcp()
    seconds_until(lambda: tcp_resolves(dns_server), 2)


def test_helper_stops_by_itself_at_its_time_cap(dns_server: Dnsmasq, dns_ledger: Path) -> None:
    held = saturate_dnsmasq_tcp(
        dns_server.address, port=dns_server.port, connections=20, hold_seconds=2
    )
    assert not tcp_resolves(dns_server)
    waited = seconds_until(lambda: not _procfs.process(held["pid"]), 6)
    assert waited < 3
    seconds_until(lambda: tcp_resolves(dns_server), 2)
    # undo_after closed the entry in this process once the hold time was over
    wait_for(lambda: Ledger(dns_ledger).open_entries() == [], 5, "entry closed")


def test_unreachable_server_fails_and_leaves_nothing(dns_ledger: Path) -> None:
    from chaos_ext._products.sandbox.servers.dnsmasq import free_port  # noqa: PLC0415

    with pytest.raises(DnsError, match="no TCP connection"):
        saturate_dnsmasq_tcp(
            "127.0.0.1", port=free_port(), connections=5, connect_timeout_seconds=0.5
        )
    (entry,) = Ledger(dns_ledger).history()
    assert entry.state == "closed"  # the partial injection was undone at once


def test_bad_input_is_refused_before_anything_happens(
    dns_server: Dnsmasq, dns_ledger: Path
) -> None:
    for bad in (
        {"connections": 0},
        {"connections": 100_000},
        {"hold_seconds": 86_400},
        {"server": "dnsmasq.local"},
        {"port": "53"},
    ):
        args: dict[str, Any] = {"server": dns_server.address, "port": dns_server.port, **bad}
        with pytest.raises(InvalidArgument):
            saturate_dnsmasq_tcp(**args)
    assert not dns_ledger.exists() or Ledger(dns_ledger).history() == []
    assert dns_server.children() == []


def _saturation_experiment(server: Dnsmasq) -> dict[str, Any]:
    return {
        "title": "dnsmasq TCP slots held, runner killed",
        "description": "the holder must be found and stopped by gameday rollback",
        "method": [
            {
                "type": "action",
                "name": "hold-dnsmasq-tcp",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.dns.actions",
                    "func": "saturate_dnsmasq_tcp",
                    "arguments": {
                        "server": server.address,
                        "port": server.port,
                        "connections": 20,
                        "hold_seconds": 120,
                    },
                },
            },
            {
                "type": "probe",
                "name": "wait",
                "provider": {"type": "process", "path": "sleep", "arguments": "60", "timeout": 90},
            },
        ],
    }


@pytest.mark.undoes("dnsmasq-tcp-hold")
def test_sigkill_runner_then_gameday_rollback_releases_the_connections(
    dns_server: Dnsmasq,
    dns_ledger: Path,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    path = write_experiment(_saturation_experiment(dns_server))
    runner = subprocess.Popen(
        gameday_argv("run", "--journal", str(tmp_path / "journal.json"), str(path)),
        env=cli_env(dns_ledger),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: len(dns_server.children()) == 20, 60, "20 children held by the run")
        (entry,) = Ledger(dns_ledger).open_entries()
        helper = entry.recipe.get("pid") or find_helpers(entry.id)[0]
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)
    # the runner is dead; the helper (its own session) still holds every slot
    assert _procfs.process(helper) is not None
    assert not tcp_resolves(dns_server)
    listed = json.loads(gameday("ledger", "--json").stdout)
    assert [e["kind"] for e in listed] == ["dnsmasq-tcp-hold"]

    result = gameday("rollback")
    assert result.returncode == 0, result.stderr
    seconds_until(lambda: tcp_resolves(dns_server), 2)
    assert _procfs.process(helper) is None
    assert find_helpers(entry.id) == []
    wait_for(lambda: dns_server.children() == [], 5, "dnsmasq's TCP children to exit")
    assert Ledger(dns_ledger).open_entries() == []


def test_the_release_says_why_no_holder_was_left(dns_server: Dnsmasq, dns_ledger: Path) -> None:
    """Issue 27, item 5: "(hold time elapsed)" only when it did; a stopped holder is told."""
    held = saturate_dnsmasq_tcp(
        dns_server.address, port=dns_server.port, connections=2, hold_seconds=60
    )
    assert stop_helpers(held["ledger_id"]) == 1  # stopped by someone else than this undo
    (fault,) = release_dnsmasq_tcp()["faults"]
    assert fault["note"] == (
        f"no helper left holding connections to {dns_server.address}:{dns_server.port}: it"
        " ended before its hold time (stopped already, or it died)"
    )
    entry = Ledger(dns_ledger).history()[0]
    later = entry.created_at + 61
    assert no_holder_note(entry, later).endswith("(hold time elapsed)")
    never = replace(entry, recipe={k: v for k, v in entry.recipe.items() if k != "pid"})
    assert "its start did not complete" in no_holder_note(never, later)
