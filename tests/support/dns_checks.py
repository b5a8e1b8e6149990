"""Checks the DNS tests make against a real dnsmasq (server side and client side)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import dns.exception
import dns.message
import dns.query

from chaos_ext._products.sandbox.servers.dnsmasq import Dnsmasq

#: Names the test dnsmasq answers; anything else under ZONES is NXDOMAIN, the rest REFUSED.
RECORDS = {
    "www.example.test": "10.0.0.5",
    "web.default.svc.cluster.local": "10.96.0.20",
    "kubernetes.default.svc.cluster.local": "10.96.0.1",
}
ZONES = ["example.test", "cluster.local"]
#: A Kubernetes pod's resolv.conf search list (namespace "default").
SEARCH = ["default.svc.cluster.local", "svc.cluster.local", "cluster.local"]


def tcp_resolves(server: Dnsmasq, timeout: float = 0.3) -> bool:
    """One TCP query for www.example.test answered within ``timeout``."""
    query = dns.message.make_query("www.example.test", "A")
    try:
        response = dns.query.tcp(query, server.address, port=server.port, timeout=timeout)
    except (OSError, dns.exception.DNSException):
        return False
    return bool(response.answer)


def seconds_until(predicate: Callable[[], bool], timeout: float) -> float:
    """How long until ``predicate()`` is true (AssertionError after ``timeout``)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if predicate():
            return time.monotonic() - started
        time.sleep(0.01)
    raise AssertionError(f"still false after {timeout} s")


def established(port: int, address: str = "127.0.0.1") -> int:
    """TCP connections to address:port in state ESTABLISHED, as ``ss`` (the kernel) counts them."""
    out = subprocess.run(
        ["ss", "-Htn", "state", "established", "dst", f"{address}:{port}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    ).stdout
    return len([line for line in out.splitlines() if line.strip()])
