"""dns_resolution_stats and dnsmasq_child_processes against real dnsmasq processes."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator

import pytest
from support.dns_checks import RECORDS
from support.harness import wait_for

from chaos_ext._products.sandbox.servers import dnsmasq
from chaos_ext._products.sandbox.servers.dnsmasq import Dnsmasq, free_port
from chaos_ext.dns.errors import DnsError
from chaos_ext.dns.probes import dns_resolution_stats, dnsmasq_child_processes
from chaos_ext.errors import InvalidArgument


def _hold(server: Dnsmasq, count: int) -> list[socket.socket]:
    return [
        socket.create_connection((server.address, server.port), timeout=2) for _ in range(count)
    ]


def test_child_count_by_pid_pidfile_and_port(dns_server: Dnsmasq) -> None:
    held = _hold(dns_server, 5)
    try:
        wait_for(lambda: len(dns_server.children()) == 5, 5, "5 TCP children")
        by_pid = dnsmasq_child_processes(pid=dns_server.pid)
        by_file = dnsmasq_child_processes(pidfile=str(dns_server.pidfile))
        by_port = dnsmasq_child_processes(port=dns_server.port)
        assert by_pid["children"] == by_file["children"] == by_port["children"] == 5
        assert by_port["pid"] == dns_server.pid and by_port["processes"] == 6
    finally:
        for sock in held:
            sock.close()
    wait_for(lambda: dnsmasq_child_processes(pid=dns_server.pid)["children"] == 0, 5, "exit")


def test_child_count_selector_must_be_explicit(dns_server: Dnsmasq) -> None:
    with pytest.raises(InvalidArgument, match="exactly one"):
        dnsmasq_child_processes()
    with pytest.raises(InvalidArgument, match="exactly one"):
        dnsmasq_child_processes(pid=dns_server.pid, port=dns_server.port)
    with pytest.raises(DnsError, match="no dnsmasq process listens"):
        dnsmasq_child_processes(port=free_port())
    with pytest.raises(DnsError, match="not a running dnsmasq"):
        dnsmasq_child_processes(pid=1)
    with pytest.raises(DnsError, match="cannot read a pid"):
        dnsmasq_child_processes(pidfile=str(dns_server.workdir / "missing.pid"))


@pytest.fixture
def netns_dnsmasq(netns_name: str) -> Iterator[Dnsmasq]:
    """dnsmasq inside a fresh network namespace (the sandbox's shape)."""
    subprocess.run(["ip", "netns", "add", netns_name], check=True, timeout=10)
    try:
        prefix = ["ip", "netns", "exec", netns_name]
        subprocess.run([*prefix, "ip", "link", "set", "lo", "up"], check=True, timeout=10)
        with dnsmasq.start(records=RECORDS, prefix=prefix) as server:
            yield server
    finally:
        subprocess.run(["ip", "netns", "delete", netns_name], check=False, timeout=10)


def test_child_count_finds_a_dnsmasq_in_another_namespace_by_port(
    netns_dnsmasq: Dnsmasq,
) -> None:
    found = dnsmasq_child_processes(port=netns_dnsmasq.port)
    assert found["pid"] == netns_dnsmasq.pid and found["children"] == 0


def test_two_dnsmasqs_on_one_port_need_a_pid(netns_dnsmasq: Dnsmasq) -> None:
    # the same port on the host too: the port no longer names one server
    with dnsmasq.start(records=RECORDS, port=netns_dnsmasq.port) as host:
        with pytest.raises(DnsError, match="select one with pid or pidfile"):
            dnsmasq_child_processes(port=host.port)
        assert dnsmasq_child_processes(pid=host.pid)["pid"] == host.pid


def test_resolution_stats_counts_answers_and_failures(dns_server: Dnsmasq) -> None:
    ok = dns_resolution_stats(
        dns_server.address, "www.example.test", port=dns_server.port, samples=20
    )
    assert ok["answered"] == 20 and ok["failure_ratio"] == 0.0 and ok["timeout_ratio"] == 0.0
    assert 0 < ok["p50_ms"] <= ok["p95_ms"] <= ok["p99_ms"] <= ok["max_ms"] < 500
    missing = dns_resolution_stats(
        dns_server.address, "nope.example.test", port=dns_server.port, protocol="tcp", samples=4
    )
    assert missing["failure_ratio"] == 1.0 and missing["outcomes"] == {"nxdomain": 4}
    refused = dns_resolution_stats(
        dns_server.address, "example.org", port=dns_server.port, samples=2
    )
    assert refused["outcomes"] == {"refused": 2}


def test_resolution_stats_times_out_on_a_silent_port() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))  # bound but never answering
        port = silent.getsockname()[1]
        stats = dns_resolution_stats(
            "127.0.0.1", "www.example.test", port=port, samples=2, timeout_seconds=0.2
        )
    # the timeout counts in full, to the histogram's 3 significant digits
    assert stats["timeout_ratio"] == 1.0 and stats["p99_ms"] == pytest.approx(200.0, rel=0.001)


def test_resolution_stats_refuses_bad_input() -> None:
    with pytest.raises(InvalidArgument, match="not an IP address"):
        dns_resolution_stats("kube-dns", "www.example.test")
    with pytest.raises(InvalidArgument, match="protocol"):
        dns_resolution_stats("127.0.0.1", "www.example.test", protocol="dot")
    with pytest.raises(InvalidArgument, match="samples"):
        dns_resolution_stats("127.0.0.1", "www.example.test", samples=0)
