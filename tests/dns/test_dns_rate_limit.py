"""limit_dns_rate in network namespaces the tests create, against a real dnsmasq on :53.

The client namespace sends DNS through its veth towards dnsmasq in the server
namespace, as a node sends to the VPC resolver. Rates are measured by the
client (answers per second) and by the limiter's own counters; the ruleset is
read back with Debian's ``nft`` CLI (an independent check of libnftables).
The host's ruleset is compared before and after: it is never touched.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.dns_netlab import (
    SERVER_IP,
    ResolverPair,
    flood_from,
    host_tables,
    netns_tables,
    resolver_pair,
)
from support.harness import ROOT, cli_env, gameday_argv, wait_for

from chaos_ext._core.ledger import Ledger
from chaos_ext.dns.actions import limit_dns_rate, remove_dns_rate_limit
from chaos_ext.dns.errors import DnsError
from chaos_ext.dns.probes import dns_rate_limit_drops, dns_rate_limit_supported
from chaos_ext.errors import InvalidArgument, TargetGone

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def pair(ledger_path: Path) -> Iterator[ResolverPair]:
    before = host_tables()
    with resolver_pair() as made:
        yield made
    assert host_tables() == before, "the host's own ruleset changed"


def _rates(report: dict[str, Any]) -> str:
    keys = ("queries_sent", "sent_qps", "achieved_qps", "answer", "error", "timeout")
    return json.dumps({key: report[key] for key in keys})


@pytest.mark.rolls_back("dns-rate-limit")
@pytest.mark.slow
def test_limit_holds_100_pps_when_1000_qps_are_offered_and_undo_restores(
    pair: ResolverPair, ledger_path: Path
) -> None:
    baseline = flood_from(pair, qps=1000, duration_seconds=3)
    assert baseline["achieved_qps"] > 500, _rates(baseline)

    applied = limit_dns_rate(pps=100, target=pair.target)
    assert applied["burst"] == 100  # one second's worth, as the VPC resolver's per-second limit
    assert netns_tables(pair.client_ns) == [applied["table"]]

    # 20 s: the full bucket at the start (100 packets) adds 5 % to 100/s
    limited = flood_from(pair, qps=1000, duration_seconds=20)
    assert limited["sent_qps"] > 800, f"the flood did not offer ~1000 QPS: {_rates(limited)}"
    assert 90 <= limited["achieved_qps"] <= 110, _rates(limited)

    drops = dns_rate_limit_drops(target=pair.target)
    assert drops["active"] and drops["pps"] == 100
    # every query is one packet: the kernel's counters and the client agree exactly
    assert drops["packets"] == limited["queries_sent"]
    assert drops["dropped"] == limited["error"]  # dropped on the way out: EPERM to the sender
    assert drops["passed"] == limited["answer"]

    removed = remove_dns_rate_limit(target=pair.target)
    assert removed["undone"] == 1 and removed["unrecorded"] == []
    assert netns_tables(pair.client_ns) == []
    after = flood_from(pair, qps=1000, duration_seconds=3)
    assert after["achieved_qps"] >= 0.9 * baseline["achieved_qps"], (
        _rates(baseline),
        _rates(after),
    )
    assert after["error"] == 0
    assert Ledger(ledger_path).open_entries() == []
    assert dns_rate_limit_drops(target=pair.target)["active"] is False


def test_only_packets_to_the_named_resolvers_count(pair: ResolverPair) -> None:
    limit_dns_rate(pps=10, resolvers=["10.77.0.99", "fd00::53"], target=pair.target)
    try:
        other = flood_from(pair, qps=300, duration_seconds=2)
        assert other["error"] == 0 and other["achieved_qps"] > 200, _rates(other)
        assert dns_rate_limit_drops(target=pair.target)["packets"] == 0
    finally:
        remove_dns_rate_limit(target=pair.target)
    limit_dns_rate(pps=10, resolvers=[SERVER_IP], target=pair.target)
    try:
        limited = flood_from(pair, qps=300, duration_seconds=2)
        assert limited["answer"] <= 10 + 2 * 10 + 2, _rates(limited)  # burst + 2 s x 10/s
        assert dns_rate_limit_drops(target=pair.target)["dropped"] == limited["error"]
    finally:
        remove_dns_rate_limit(target=pair.target)


def test_bad_input_is_refused_before_anything_changes(
    pair: ResolverPair, ledger_path: Path
) -> None:
    for bad in (
        {"pps": 0},
        {"pps": "100"},
        {"burst": -1},
        {"port": 0},
        {"resolvers": ["kube-dns"]},
        {"resolvers": "10.0.0.2"},
        {"duration_seconds": -1},
        {"target": "netns:"},
        {"target": "host:1.2.3.4"},
    ):
        arguments: dict[str, Any] = {"pps": 100, "target": pair.target, **bad}
        with pytest.raises(InvalidArgument):
            limit_dns_rate(**arguments)
    with pytest.raises(TargetGone, match="does not exist"):
        limit_dns_rate(pps=100, target="netns:gdt-no-such-ns")
    gone = remove_dns_rate_limit(target="netns:gdt-no-such-ns")  # a rollback after teardown
    assert gone["undone"] == 0 and "the target is gone" in gone["unrecorded"][0]
    assert netns_tables(pair.client_ns) == []
    assert not ledger_path.exists() or Ledger(ledger_path).history() == []


def test_a_second_limit_on_the_same_target_is_refused(pair: ResolverPair) -> None:
    first = limit_dns_rate(pps=100, target=pair.target)
    try:
        with pytest.raises(DnsError, match="already has a DNS rate limit"):
            limit_dns_rate(pps=50, target=pair.target)
        assert netns_tables(pair.client_ns) == [first["table"]]
    finally:
        remove_dns_rate_limit(target=pair.target)


def test_preflight_builds_in_a_scratch_namespace_and_changes_nothing(pair: ResolverPair) -> None:
    found = dns_rate_limit_supported(target=pair.target)
    assert found["via"] == "libnftables" and found["kernel"]
    assert netns_tables(pair.client_ns) == []


def test_preflight_names_a_missing_nftables_binding(pair: ResolverPair, tmp_path: Path) -> None:
    """A machine without the binding: ``import nftables`` fails (blocked in a subprocess)."""
    code = (
        "import sys; sys.modules['nftables'] = None\n"
        "from chaos_ext.dns.actions import limit_dns_rate\n"
        "from chaos_ext.errors import PreflightFailed\n"
        "try:\n"
        f"    limit_dns_rate(pps=100, target={pair.target!r})\n"
        "except PreflightFailed as exc:\n"
        "    print('PreflightFailed:', exc)\n"
    )
    env = cli_env(tmp_path / "ledger.sqlite3")
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
        check=True,
    ).stdout
    assert "PreflightFailed: the Python module nftables is missing: pip install pip-nftables" in out
    assert netns_tables(pair.client_ns) == []
    assert (
        not (tmp_path / "ledger.sqlite3").exists()
        or not Ledger(tmp_path / "ledger.sqlite3").history()
    )


def test_duration_removes_the_limit_by_itself(pair: ResolverPair, ledger_path: Path) -> None:
    limit_dns_rate(pps=100, duration_seconds=1, target=pair.target)
    assert len(netns_tables(pair.client_ns)) == 1
    wait_for(lambda: netns_tables(pair.client_ns) == [], 15, "the limit to expire")
    wait_for(lambda: Ledger(ledger_path).open_entries() == [], 5, "the entry to close")


def _killed_run_experiment(pair: ResolverPair) -> dict[str, Any]:
    return {
        "title": "VPC resolver packet limit, runner killed",
        "description": "the table must be found and deleted by gameday rollback",
        "method": [
            {
                "type": "action",
                "name": "limit-dns-like-the-vpc-resolver",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.dns.actions",
                    "func": "limit_dns_rate",
                    "arguments": {"pps": 100, "target": pair.target},
                },
            },
            {
                "type": "probe",
                "name": "wait",
                "provider": {"type": "process", "path": "sleep", "arguments": "90", "timeout": 120},
            },
        ],
    }


@pytest.mark.undoes("dns-rate-limit")
@pytest.mark.slow
def test_sigkill_of_the_runner_then_gameday_rollback_deletes_the_table(
    pair: ResolverPair,
    ledger_path: Path,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    path = write_experiment(_killed_run_experiment(pair))
    runner = subprocess.Popen(
        gameday_argv("run", "--journal", str(tmp_path / "journal.json"), str(path)),
        env=cli_env(ledger_path),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: len(netns_tables(pair.client_ns)) == 1, 90, "the run's limit")
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)
    (table,) = netns_tables(pair.client_ns)
    limited = flood_from(pair, qps=1000, duration_seconds=3)
    assert limited["achieved_qps"] < 200, _rates(limited)  # still limited with the runner dead
    listed = json.loads(gameday("ledger", "--json").stdout)
    assert [e["kind"] for e in listed] == ["dns-rate-limit"]

    result = gameday("rollback")
    assert result.returncode == 0, result.stdout + result.stderr
    assert netns_tables(pair.client_ns) == []
    after = flood_from(pair, qps=1000, duration_seconds=3)
    assert after["achieved_qps"] > 500 and after["error"] == 0, _rates(after)
    assert Ledger(ledger_path).open_entries() == []
    assert table.split()[1] in Ledger(ledger_path).history()[0].note  # type: ignore[operator]


_OTHER_RUN = """
import sys, time
from chaos_ext.dns.actions import limit_dns_rate
limit_dns_rate(pps=100, target=sys.argv[1])
print("limited", flush=True)
time.sleep(120)
"""


def test_remove_leaves_a_live_runs_limit_alone(pair: ResolverPair, ledger_path: Path) -> None:
    """Issue 22, point 5: another live run's table is neither ours nor "unrecorded"."""
    other = subprocess.Popen(
        [sys.executable, "-c", _OTHER_RUN, pair.target],
        stdout=subprocess.PIPE,
        text=True,
        env=cli_env(ledger_path),
    )
    try:
        assert other.stdout is not None and other.stdout.readline() == "limited\n"
        (table,) = netns_tables(pair.client_ns)
        removed = remove_dns_rate_limit(target=pair.target)
        assert removed["undone"] == 0, removed
        (kept,) = removed["unrecorded"]  # not swept as "without a ledger entry"
        assert f"table {table.split()[1]} left alone" in kept and "runner is alive" in kept
        assert len(removed["left_alone"]) == 1, removed
        removed = remove_dns_rate_limit(target=pair.target, include_dead_runs=True)
        assert removed["undone"] == 0  # alive: still not ours
        assert netns_tables(pair.client_ns) == [table]
    finally:
        other.kill()
        other.wait(timeout=10)
    removed = remove_dns_rate_limit(target=pair.target, include_dead_runs=True)
    assert removed["undone"] == 1, removed
    assert netns_tables(pair.client_ns) == []
    assert Ledger(ledger_path).open_entries() == []
