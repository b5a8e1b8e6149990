"""flood_dns against a real dnsmasq: search-list amplification counted server-side, rates, caps."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.crashkit import quiet_for
from support.dns_checks import SEARCH, seconds_until
from support.harness import cli_env, gameday_argv, wait_for

from chaos_ext._core.helper import find_helpers
from chaos_ext._core.ledger import Ledger
from chaos_ext._products.sandbox.servers.dnsmasq import Dnsmasq
from chaos_ext.dns._search import candidates
from chaos_ext.dns.actions import flood_dns, stop_dns_flood
from chaos_ext.errors import InvalidArgument

#: name -> the candidates a glibc stub with ndots:5 asks, up to the one that answers
CHAINS = {
    # 2 dots < 5: three NXDOMAIN suffixes, then the name itself answers -> 4 queries
    "www.example.test": [*(f"www.example.test.{d}" for d in SEARCH), "www.example.test"],
    # a Service's short name answers at the first suffix -> 1 query
    "web": ["web.default.svc.cluster.local"],
    # the trailing-dot fix -> 1 query
    "kubernetes.default.svc.cluster.local.": ["kubernetes.default.svc.cluster.local"],
    # a name that exists nowhere -> all 4 candidates, every one NXDOMAIN
    "gone.example.test": [*(f"gone.example.test.{d}" for d in SEARCH), "gone.example.test"],
}


def _flood(server: Dnsmasq, **arguments: Any) -> dict[str, Any]:
    report = flood_dns(server.address, port=server.port, **arguments)
    time.sleep(0.2)  # let dnsmasq's log catch up with the last answers
    return report


def _logged(server: Dnsmasq) -> Counter[str]:
    return Counter({name: n for (qtype, name), n in server.query_counts().items() if qtype == "A"})


def test_ndots_search_expansion_sends_the_expected_queries_per_name(
    dns_server: Dnsmasq, dns_ledger: Path
) -> None:
    report = _flood(
        dns_server,
        names=list(CHAINS),
        search_domains=SEARCH,
        ndots=5,
        qps=150,
        duration_seconds=2,
    )
    logged = _logged(dns_server)
    # a query dropped by an overloaded dnsmasq (a timeout) is neither logged nor followed up
    lost = report["timeout"]
    assert report["queries_sent"] - lost <= sum(logged.values()) <= report["queries_sent"]
    # the count is what the chains are checked on; the rate itself is test_rate_is_held's job
    assert report["queries_sent"] > 120, report
    cut = lost + report["lookups_unfinished"]
    lookups = Counter[str]()
    for name, chain in CHAINS.items():
        asked = [logged[c] for c in chain]
        # every lookup walks its chain in order; only cut lookups stop early
        assert asked == sorted(asked, reverse=True) and asked[0] - asked[-1] <= cut, (name, asked)
        lookups[name] = asked[0]
        assert asked[0] >= 20, (name, asked)
    # nothing beyond a chain was asked (e.g. www.example.test's suffixes after its answer)
    assert set(logged) == {c for chain in CHAINS.values() for c in chain}
    assert report["lookups"] - lost <= sum(lookups.values()) <= report["lookups"]
    # 4 + 1 + 1 + 4 queries for 4 lookups: the amplification the report states; a lookup
    # whose query timed out (dnsmasq overloaded on a busy machine) ends early, at most 3 short
    finished = report["lookups_answered"] + report["lookups_failed"]
    assert 10 / 4 - 3 * lost / finished - 0.1 <= report["queries_per_lookup"] <= 10 / 4 + 0.1, (
        report
    )
    nxdomain = sum(logged[c] for chain in CHAINS.values() for c in chain[:-1])
    nxdomain += logged["gone.example.test"]
    assert nxdomain - lost <= report["nxdomain"] <= nxdomain
    assert report["p99_ms"] is not None


def test_expansion_matches_the_pure_helper(dns_server: Dnsmasq, dns_ledger: Path) -> None:
    # ndots:1 (the usual Linux default): a dotted name is asked as is first and answers
    report = _flood(
        dns_server,
        names=["www.example.test"],
        search_domains=SEARCH,
        ndots=1,
        qps=100,
        max_queries=50,
        duration_seconds=5,
    )
    assert candidates("www.example.test", SEARCH, 1)[0] == "www.example.test"
    assert _logged(dns_server) == Counter({"www.example.test": 50})
    assert report["queries_per_lookup"] == 1.0 and report["answer"] == 50


@pytest.mark.parametrize("qps", [100, 2000])
def test_rate_is_held(dns_server: Dnsmasq, dns_ledger: Path, qps: int) -> None:
    started = time.monotonic()
    report = flood_dns(
        dns_server.address,
        names=["www.example.test"],
        port=dns_server.port,
        qps=qps,
        duration_seconds=2,
        concurrency=2000,
    )
    wall = time.monotonic() - started
    # never above the rate; the pace of the sends is the target's
    assert report["queries_sent"] <= 2 * qps + 1
    assert report["sent_qps"] == pytest.approx(qps, rel=0.05)
    # a loaded machine may stall the last few ms: sends due after the time cap are dropped
    assert report["queries_sent"] >= 0.85 * 2 * qps
    time.sleep(0.2)
    # the server saw every query that was answered (a busy dnsmasq may drop a few)
    assert report["responses"] <= sum(_logged(dns_server).values()) <= report["queries_sent"]
    assert 1.9 < wall < 3.5


def test_query_count_cap_stops_early(dns_server: Dnsmasq, dns_ledger: Path) -> None:
    started = time.monotonic()
    report = flood_dns(
        dns_server.address,
        names=["www.example.test"],
        port=dns_server.port,
        qps=1000,
        duration_seconds=30,
        max_queries=300,
    )
    assert report["queries_sent"] == 300
    assert time.monotonic() - started < 2
    seconds_until(lambda: sum(_logged(dns_server).values()) == 300, 2)


def test_tcp_flood_reuses_connections(dns_server: Dnsmasq, dns_ledger: Path) -> None:
    report = _flood(
        dns_server,
        names=["web"],
        search_domains=SEARCH,
        ndots=5,
        protocol="tcp",
        qps=500,
        duration_seconds=1,
        concurrency=4,
    )
    assert report["answer"] == report["queries_sent"] - report["retried"] > 400
    assert report["timeout"] == 0
    # dnsmasq closes a TCP connection after 100 queries; a few more are opened, not one each
    assert report["connections_opened"] < report["queries_sent"] / 50
    # a query sent on a connection dnsmasq was closing never reached it; it went again
    assert sum(_logged(dns_server).values()) == report["queries_sent"] - report["retried"]


def test_tcp_flood_counts_timeouts_past_dnsmasqs_20_children(
    dns_server: Dnsmasq, dns_ledger: Path
) -> None:
    report = flood_dns(
        dns_server.address,
        names=["www.example.test"],
        port=dns_server.port,
        protocol="tcp",
        qps=200,
        duration_seconds=1.5,
        concurrency=25,
        timeout_seconds=0.5,
    )
    assert report["timeout"] >= 5  # 5 connections wait in the accept queue, never served
    assert report["answer"] > 0


def test_flood_records_then_closes_its_ledger_entry(dns_server: Dnsmasq, dns_ledger: Path) -> None:
    flood_dns(dns_server.address, names=["web"], port=dns_server.port, qps=50, max_queries=5)
    (entry,) = Ledger(dns_ledger).history()
    assert (entry.kind, entry.state) == ("dns-flood", "closed")


@pytest.mark.parametrize(
    "bad",
    [
        {"qps": 10_000_000},
        {"duration_seconds": 100_000},
        {"names": []},
        {"names": "www.example.test"},
        {"protocol": "doh"},
        {"ndots": -1},
        {"search_domains": ["bad..domain"]},
        {"server": "localhost"},
        {"concurrency": 0},
    ],
)
def test_bad_input_is_refused_before_anything_is_sent(
    dns_server: Dnsmasq, dns_ledger: Path, bad: dict[str, Any]
) -> None:
    arguments: dict[str, Any] = {
        "server": dns_server.address,
        "names": ["web"],
        "port": dns_server.port,
        "search_domains": SEARCH,
        "ndots": 5,
        **bad,
    }
    with pytest.raises(InvalidArgument):
        flood_dns(**arguments)
    assert not _logged(dns_server)
    assert not dns_ledger.exists() or Ledger(dns_ledger).history() == []


def test_two_worker_processes_split_the_load_and_merge_their_counts(
    dns_server: Dnsmasq, dns_ledger: Path
) -> None:
    report = _flood(
        dns_server,
        names=list(CHAINS),
        search_domains=SEARCH,
        ndots=5,
        qps=400,
        duration_seconds=1.5,
        workers=2,
    )
    assert report["workers"] == 2
    assert report["queries_sent"] == sum(_logged(dns_server).values())
    assert report["sent_qps"] == pytest.approx(400, rel=0.05)
    assert report["queries_per_lookup"] == pytest.approx(10 / 4, abs=0.1)
    (entry,) = Ledger(dns_ledger).history()
    assert entry.state == "closed" and find_helpers(entry.id) == []


@pytest.mark.undoes("dns-flood")
def test_sigkill_runner_then_gameday_rollback_stops_flood_workers(
    dns_server: Dnsmasq,
    dns_ledger: Path,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    flood = {
        "type": "action",
        "name": "flood",
        "provider": {
            "type": "python",
            "module": "chaos_ext.dns.actions",
            "func": "flood_dns",
            "arguments": {
                "server": dns_server.address,
                "port": dns_server.port,
                "names": ["web"],
                "qps": 100,
                "duration_seconds": 120,
                "workers": 2,
            },
        },
    }
    path = write_experiment(
        {"title": "flood, runner killed", "description": "-", "method": [flood]}
    )
    runner = subprocess.Popen(
        gameday_argv("run", "--journal", str(tmp_path / "journal.json"), str(path)),
        env=cli_env(dns_ledger),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: sum(_logged(dns_server).values()) > 50, 60, "the flood to reach dnsmasq")
        (entry,) = Ledger(dns_ledger).open_entries()
        assert len(find_helpers(entry.id)) == 2
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)
    before = sum(_logged(dns_server).values())
    wait_for(lambda: sum(_logged(dns_server).values()) > before + 20, 10, "workers still flooding")

    result = gameday("rollback")
    assert result.returncode == 0, result.stderr
    assert find_helpers(entry.id) == []
    time.sleep(0.3)
    stopped_at = sum(_logged(dns_server).values())
    time.sleep(0.5)
    assert sum(_logged(dns_server).values()) == stopped_at
    assert Ledger(dns_ledger).open_entries() == []


@pytest.mark.rolls_back("dns-flood")
def test_stop_dns_flood_stops_a_background_floods_workers(
    dns_server: Dnsmasq, dns_ledger: Path
) -> None:
    """The rollback activity itself, not a sweep: a flood in the background, stopped mid-way.

    ``flood_dns`` runs in a thread (as chaoslib runs a ``background`` action) for 120 s; the
    test calls ``stop_dns_flood`` once dnsmasq logs the flood, and the workers must be gone and
    dnsmasq's own query log must stop growing (the mutation check, issue 34).
    """
    ended: list[object] = []

    def flood() -> None:
        try:
            ended.append(
                flood_dns(
                    dns_server.address,
                    port=dns_server.port,
                    names=["web"],
                    qps=100,
                    duration_seconds=120,
                    workers=2,
                )
            )
        except Exception as exc:  # noqa: BLE001 - the flood's own ending, checked below
            ended.append(exc)

    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    wait_for(lambda: sum(_logged(dns_server).values()) > 50, 60, "the flood to reach dnsmasq")
    (entry,) = Ledger(dns_ledger).open_entries()
    assert len(find_helpers(entry.id)) == 2

    stopped = stop_dns_flood()
    assert stopped["undone"] == 1, stopped
    assert [f["ledger_id"] for f in stopped["faults"]] == [entry.id]
    assert find_helpers(entry.id) == []
    thread.join(timeout=60)  # the action ends with its workers, long before its 120 s
    assert not thread.is_alive() and ended
    wait_for(lambda: quiet_for(lambda: sum(_logged(dns_server).values()), 0.5), 15, "quiet")
    assert Ledger(dns_ledger).open_entries() == []
