"""inject_dns_errors in network namespaces the tests create, against a real dnsmasq on :53.

dnsmasq (in the server namespace) serves ``a.test`` and ``b.test``; the client
namespace's queries go through the error proxy. Queries are sent with
dnspython from inside the client namespace, over UDP and TCP; the ruleset is
read back with Debian's ``nft`` CLI, the conntrack table with pyroute2, the
proxy process found by its token in /proc: independent checks of what is left.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import pytest
from support.dns_errors import (
    RECORDS,
    address,
    ask,
    conntrack_to,
    killed_run_experiment,
    run_then_kill,
    two_names,
)
from support.dns_netlab import SERVER_IP, ResolverPair, netns_tables
from support.harness import ROOT, wait_for

from chaos_ext._core.helper import find_helpers, stop_helpers
from chaos_ext._core.ledger import Ledger
from chaos_ext._core.targets.netns import run_in_netns
from chaos_ext.dns.actions import inject_dns_errors, remove_dns_errors
from chaos_ext.dns.errors import DnsError
from chaos_ext.dns.plan import plan_inject_dns_errors
from chaos_ext.errors import InvalidArgument

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def pair(ledger_path: Path) -> Iterator[ResolverPair]:
    with two_names() as made:
        yield made


def raw(pair: ResolverPair, name: str, *, tcp: bool = False) -> bytes:
    """The answer's bytes as received (id included) for a fixed query id."""
    query = dns.message.make_query(name, "A", id=4242)

    def send() -> bytes:
        if tcp:
            answer = dns.query.tcp(query, SERVER_IP, timeout=1.0)
        else:
            answer = dns.query.udp(query, SERVER_IP, timeout=1.0)
        assert answer.id == 4242
        return answer.to_wire()

    return run_in_netns(f"/run/netns/{pair.client_ns}", send, timeout=30)


def redirected_udp(pair: ResolverPair) -> int:
    """Packets our table's UDP redirect rule sent to the proxy (its counter, read with nft)."""
    out = subprocess.run(
        ["ip", "netns", "exec", pair.client_ns, "nft", "-j", "list", "ruleset"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    total = 0
    for item in json.loads(out)["nftables"]:
        expr = item.get("rule", {}).get("expr", [])
        if any("ct" in e.get("match", {}).get("left", {}) for e in expr):
            total += sum(e["counter"]["packets"] for e in expr if "counter" in e)
    return total


def assert_nothing_left(pair: ResolverPair, applied: dict[str, Any]) -> None:
    assert netns_tables(pair.client_ns) == []
    assert find_helpers(applied["ledger_id"]) == []
    assert conntrack_to(pair, sorted(applied["proxy_ports"].values())) == []


EXPECTED = {
    "nxdomain": dns.rcode.NXDOMAIN,
    "servfail": dns.rcode.SERVFAIL,
    "refused": dns.rcode.REFUSED,
}


@pytest.mark.rolls_back("dns-errors")
@pytest.mark.parametrize("error", ["nxdomain", "servfail", "refused", "timeout", "random-ip"])
def test_matching_names_get_the_error_over_udp_and_tcp_the_rest_passes_unchanged(
    pair: ResolverPair, ledger_path: Path, error: str
) -> None:
    before = {tcp: raw(pair, "b.test", tcp=tcp) for tcp in (False, True)}
    assert address(ask(pair, "a.test")) == RECORDS["a.test"]

    applied = inject_dns_errors(["a.*"], error, target=pair.target, resolvers=[SERVER_IP])
    assert netns_tables(pair.client_ns) == [applied["table"]]
    for tcp in (False, True):
        got = ask(pair, "A.Test.", tcp=tcp)
        if error == "timeout":
            assert got is None, got
        elif error == "random-ip":
            assert got.rcode() == dns.rcode.NOERROR
            assert address(got) not in ("", RECORDS["a.test"])
            assert ask(pair, "a.test", tcp=tcp, qtype="AAAA").answer[0].rdtype == 28
        else:
            assert got.rcode() == EXPECTED[error] and not got.answer
            assert got.flags & dns.flags.QR and got.flags & dns.flags.RA
        # the other name: the resolver's answer, byte for byte, the client's id restored
        assert raw(pair, "b.test", tcp=tcp) == before[tcp]

    removed = remove_dns_errors(target=pair.target)
    assert removed["undone"] == 1, removed
    assert_nothing_left(pair, applied)
    for tcp in (False, True):
        assert address(ask(pair, "a.test", tcp=tcp)) == RECORDS["a.test"]
    assert Ledger(ledger_path).open_entries() == []


def test_percent_is_roughly_honoured_on_200_queries(pair: ResolverPair) -> None:
    applied = inject_dns_errors(
        ["a.test"], "nxdomain", target=pair.target, resolvers=[SERVER_IP], percent=30
    )
    try:

        def count() -> int:
            query = dns.message.make_query("a.test", "A")
            failed = 0
            for _ in range(200):
                answer = dns.query.udp(query, SERVER_IP, timeout=1.0)
                failed += answer.rcode() == dns.rcode.NXDOMAIN
            return failed

        failed = run_in_netns(f"/run/netns/{pair.client_ns}", count, timeout=60)
        # binomial(200, 0.3): mean 60, sd 6.5; 30..90 is beyond 4.5 sd on either side
        assert 30 <= failed <= 90, failed
    finally:
        remove_dns_errors(target=pair.target)
    assert_nothing_left(pair, applied)


def test_patterns_as_chaos_mesh_takes_them(pair: ResolverPair) -> None:
    inject_dns_errors(["?.test", "b.tes*"], "refused", target=pair.target, resolvers=[SERVER_IP])
    try:
        assert ask(pair, "a.test").rcode() == dns.rcode.REFUSED  # ? = one character
        assert ask(pair, "b.test").rcode() == dns.rcode.REFUSED  # * at the end
        assert ask(pair, "ab.test").rcode() == dns.rcode.NXDOMAIN  # dnsmasq's own answer
    finally:
        remove_dns_errors(target=pair.target)


def test_the_resolvers_default_to_the_namespace_resolv_conf(pair: ResolverPair) -> None:
    folder = Path("/etc/netns") / pair.client_ns
    folder.mkdir(parents=True)
    try:
        (folder / "resolv.conf").write_text(f"search test\nnameserver {SERVER_IP}\n")
        applied = inject_dns_errors(["a.test"], "servfail", target=pair.target)
        try:
            assert applied["resolvers"] == [SERVER_IP]
            assert ask(pair, "a.test").rcode() == dns.rcode.SERVFAIL
        finally:
            remove_dns_errors(target=pair.target)
    finally:
        (folder / "resolv.conf").unlink(missing_ok=True)
        folder.rmdir()


def test_duration_ends_it_by_itself(pair: ResolverPair, ledger_path: Path) -> None:
    applied = inject_dns_errors(
        ["a.test"], "nxdomain", target=pair.target, resolvers=[SERVER_IP], duration_seconds=1
    )
    wait_for(lambda: Ledger(ledger_path).open_entries() == [], 20, "the fault to end")
    assert_nothing_left(pair, applied)
    assert address(ask(pair, "a.test")) == RECORDS["a.test"]


def test_a_second_injection_in_the_same_namespace_is_refused(pair: ResolverPair) -> None:
    first = inject_dns_errors(["a.test"], "nxdomain", target=pair.target, resolvers=[SERVER_IP])
    try:
        with pytest.raises(DnsError, match="already has DNS errors injected"):
            inject_dns_errors(["b.test"], "nxdomain", target=pair.target, resolvers=[SERVER_IP])
        assert netns_tables(pair.client_ns) == [first["table"]]
    finally:
        remove_dns_errors(target=pair.target)


def test_bad_input_is_refused_before_anything_changes(
    pair: ResolverPair, ledger_path: Path
) -> None:
    for bad in (
        {"patterns": []},
        {"patterns": "a.test"},
        {"patterns": ["a*.test"]},
        {"patterns": ["a..test"]},
        {"error": "nodata"},
        {"percent": 0},
        {"percent": 101},
        {"port": 0},
        {"resolvers": ["kube-dns"]},
        {"duration_seconds": 0},
        {"target": "ssh:node-1:99999"},
        {"target": "pod:Default/app"},
    ):
        arguments: dict[str, Any] = {
            "patterns": ["a.test"],
            "error": "nxdomain",
            "target": pair.target,
            "resolvers": [SERVER_IP],
            **bad,
        }
        with pytest.raises(InvalidArgument):
            inject_dns_errors(**arguments)
    with pytest.raises(InvalidArgument) as every:
        inject_dns_errors(["a*b"], "oops", target=pair.target, percent=0)
    for part in ("'a*b'", "'oops'", "percent: 0"):
        assert part in str(every.value)
    assert netns_tables(pair.client_ns) == []
    assert not ledger_path.exists() or Ledger(ledger_path).history() == []


@pytest.mark.undoes("dns-errors")
def test_a_long_lived_udp_socket_is_caught_at_once_and_released_at_once(
    pair: ResolverPair,
) -> None:
    """The same source port before, during and after: conntrack would otherwise keep
    its flow on the path it took first (120 s for a UDP flow that saw replies)."""
    # a namespace where conntrack already runs (a Kubernetes node's: kube-proxy's rules)
    rule = "table inet gdt_ct { chain out { type filter hook output priority 0; ct state new; }; }"
    subprocess.run(["ip", "netns", "exec", pair.client_ns, "nft", rule], check=True, timeout=30)
    sock = run_in_netns(
        f"/run/netns/{pair.client_ns}",
        lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM),
        timeout=30,
    )
    sock.settimeout(1.0)
    sock.connect((SERVER_IP, 53))

    def rcode(name: str = "a.test") -> int:
        sock.send(dns.message.make_query(name, "A").to_wire())
        return dns.message.from_wire(sock.recv(4096)).rcode()

    try:
        assert rcode() == dns.rcode.NOERROR  # a conntrack entry without NAT now exists
        inject_dns_errors(["a.test"], "nxdomain", target=pair.target, resolvers=[SERVER_IP])
        assert rcode() == dns.rcode.NXDOMAIN  # redirected from its next query on
        # one socket, one flow: each query still goes its own way (two conntrack zones)
        for _ in range(3):
            assert rcode("b.test") == dns.rcode.NOERROR
            assert rcode("a.test") == dns.rcode.NXDOMAIN
        remove_dns_errors(target=pair.target)
        assert rcode() == dns.rcode.NOERROR  # back to the resolver at once
    finally:
        sock.close()
        subprocess.run(
            ["ip", "netns", "exec", pair.client_ns, "nft", "delete table inet gdt_ct"],
            check=False,
            timeout=30,
        )


@pytest.mark.undoes("dns-errors")
@pytest.mark.slow
def test_sigkill_of_the_runner_the_fault_ends_at_its_deadline(
    pair: ResolverPair,
    ledger_path: Path,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
) -> None:
    duration = 8.0
    path = write_experiment(killed_run_experiment(pair.target, duration))
    table, seen = run_then_kill(pair, ledger_path, tmp_path, path)
    assert ask(pair, "a.test").rcode() == dns.rcode.NXDOMAIN  # still on, the runner dead
    (entry,) = Ledger(ledger_path).open_entries()
    token = entry.recipe["token"]
    # the watchdog ends it at the deadline, before the proxy's own cap (+15 s) would
    wait_for(lambda: Ledger(ledger_path).open_entries() == [], duration + 12, "the watchdog")
    assert time.monotonic() - seen < duration + 12
    assert netns_tables(pair.client_ns) == [] and find_helpers(token) == []
    assert address(ask(pair, "a.test")) == RECORDS["a.test"]
    assert table in str(Ledger(ledger_path).history()[0].note)


def _lose_ledger(ledger: Path) -> None:
    """Delete the ledger's database, event log, lock files and marker folder."""
    for part in ledger.parent.glob(ledger.name + "*"):
        part.unlink()
    shutil.rmtree(os.environ["GAMEDAY_LEDGER_MARKERS"], ignore_errors=True)


@pytest.mark.slow
def test_without_its_ledger_the_scan_finds_table_and_proxy_and_rollback_orphans_removes_them(
    pair: ResolverPair,
    ledger_path: Path,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    path = write_experiment(killed_run_experiment(pair.target, 200))
    table, _ = run_then_kill(pair, ledger_path, tmp_path, path)
    (entry,) = Ledger(ledger_path).open_entries()
    token = entry.recipe["token"]
    ports = entry.recipe["ports"]
    assert ask(pair, "a.test").rcode() == dns.rcode.NXDOMAIN
    _lose_ledger(ledger_path)
    try:
        scan = gameday("ledger", "--scan", "--json")
        found = {f["ref"]: f for f in json.loads(scan.stdout)["found"]}
        refs = sorted(ref for ref in found if table in ref or token in ref)
        assert len(refs) == 2, sorted(found)  # the table and the proxy (helper)
        assert {found[ref]["status"] for ref in refs} == {"orphan"}
        only = [arg for ref in refs for arg in ("--only", ref)]
        removed = gameday("rollback", "--orphans", *only)
        assert removed.returncode == 0, removed.stdout + removed.stderr
        # checked through the objects themselves
        assert netns_tables(pair.client_ns) == []
        assert find_helpers(token) == []
        assert conntrack_to(pair, ports) == []
        assert address(ask(pair, "a.test")) == RECORDS["a.test"]
    finally:
        stop_helpers(token)


def test_gameday_validate_shows_every_bad_argument(
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    experiment = killed_run_experiment("netns:gdt-not-touched", 10)
    arguments = experiment["method"][0]["provider"]["arguments"]
    arguments.update(patterns=["a*b", "ok.test"], error="oops", percent=0)
    result = gameday("validate", str(write_experiment(experiment)))
    assert result.returncode != 0
    for part in ("'a*b'", "'oops'", "percent: 0"):
        assert part in result.stdout + result.stderr, result.stdout + result.stderr
    good = gameday("validate", str(ROOT / "experiments" / "dns-search-list-nxdomain.json"))
    assert good.returncode == 0, good.stdout + good.stderr


def test_a_proxy_that_ends_by_itself_takes_its_redirect_with_it(pair: ResolverPair) -> None:
    """SIGTERM (or its own cap) ends the proxy: it deletes its table and its flows first,
    so a redirect to a dead port is never left; the undo then finds nothing to do."""
    applied = inject_dns_errors(["a.test"], "nxdomain", target=pair.target, resolvers=[SERVER_IP])
    assert ask(pair, "a.test").rcode() == dns.rcode.NXDOMAIN
    os.kill(applied["proxy_pid"], signal.SIGTERM)
    wait_for(lambda: netns_tables(pair.client_ns) == [], 10, "the proxy to remove its table")
    wait_for(lambda: find_helpers(applied["ledger_id"]) == [], 10, "the proxy to exit")
    assert address(ask(pair, "a.test")) == RECORDS["a.test"]
    removed = remove_dns_errors(target=pair.target)
    assert removed["undone"] == 1
    assert_nothing_left(pair, applied)


def test_the_plan_names_names_error_resolvers_and_namespace_and_touches_nothing(
    pair: ResolverPair, ledger_path: Path
) -> None:
    plan = plan_inject_dns_errors(["a.*"], "servfail", target=pair.target, resolvers=[SERVER_IP])
    radius = plan["blast_radius"]
    assert radius["patterns"] == ["a.*"] and radius["error"] == "servfail"
    assert radius["resolvers"] == [SERVER_IP] and radius["netns"].endswith(pair.client_ns)
    assert all(check["ok"] for check in plan["preflight"]), plan["preflight"]
    assert "a.*" in plan["would"] and SERVER_IP in plan["would"]
    assert netns_tables(pair.client_ns) == []
    assert not ledger_path.exists() or Ledger(ledger_path).history() == []
    inject_dns_errors(["b.test"], "refused", target=pair.target, resolvers=[SERVER_IP])
    try:
        again = plan_inject_dns_errors(["a.*"], "nxdomain", target=pair.target)
        refused = [c for c in again["preflight"] if not c["ok"]]
        assert {c["check"] for c in refused} >= {"no DNS errors injected there yet"}, refused
    finally:
        remove_dns_errors(target=pair.target)


def test_an_unreachable_resolver_among_them_fails_only_its_own_queries(
    pair: ResolverPair,
) -> None:
    """The sandbox's fragile app has no route to the tuned app's node-local cache address:
    found by running experiments/dns-search-list-nxdomain.json there."""
    inject_dns_errors(
        ["a.test"], "nxdomain", target=pair.target, resolvers=[SERVER_IP, "169.254.20.10"]
    )
    try:
        assert ask(pair, "a.test").rcode() == dns.rcode.NXDOMAIN
        assert address(ask(pair, "b.test")) == RECORDS["b.test"]
    finally:
        remove_dns_errors(target=pair.target)


def test_a_query_the_kernel_sends_to_the_proxy_but_no_pattern_matches_comes_back_unchanged(
    pair: ResolverPair,
) -> None:
    """'a.*' lets the kernel redirect any name starting with the label 'a' (a superset);
    'a.' alone does not match it, so the proxy forwards it: the same bytes, our id back."""
    before = raw(pair, "a.")
    applied = inject_dns_errors(["a.*"], "servfail", target=pair.target, resolvers=[SERVER_IP])
    try:
        assert raw(pair, "a.") == before
        assert redirected_udp(pair) == 1  # it did go through the proxy
        assert ask(pair, "a.test").rcode() == dns.rcode.SERVFAIL
    finally:
        remove_dns_errors(target=pair.target)
    assert_nothing_left(pair, applied)
