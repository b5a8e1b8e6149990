"""What the DNS error tests share: the two names dnsmasq serves, queries from the client
namespace, the conntrack entries to the proxy, and a run that is SIGKILLed with the fault on."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dns.exception
import dns.message
import dns.query
from pyroute2 import Conntrack

from chaos_ext._core.targets.netns import run_in_netns
from support.dns_netlab import SERVER_IP, ResolverPair, host_tables, netns_tables, resolver_pair
from support.harness import cli_env, gameday_argv, wait_for

__all__ = [
    "RECORDS",
    "address",
    "ask",
    "conntrack_to",
    "killed_run_experiment",
    "run_then_kill",
    "two_names",
]

RECORDS = {"a.test": "10.77.5.1", "b.test": "10.77.5.2"}


@contextmanager
def two_names() -> Iterator[ResolverPair]:
    """A client namespace and dnsmasq serving RECORDS; the host's ruleset checked unchanged."""
    before = host_tables()
    with resolver_pair(records=RECORDS, zones=["test"]) as made:
        yield made
    assert host_tables() == before, "the host's own ruleset changed"


def ask(pair: ResolverPair, name: str, *, tcp: bool = False, qtype: str = "A") -> Any:
    """One query from inside the client namespace: the answer message, or None (timeout)."""
    query = dns.message.make_query(name, qtype)

    def send() -> Any:
        try:
            if tcp:
                return dns.query.tcp(query, SERVER_IP, timeout=1.0)
            return dns.query.udp(query, SERVER_IP, timeout=1.0)
        except dns.exception.Timeout:
            return None

    return run_in_netns(f"/run/netns/{pair.client_ns}", send, timeout=30)


def address(message: Any) -> str:
    return str(message.answer[0][0]) if message is not None and message.answer else ""


def conntrack_to(pair: ResolverPair, ports: list[int]) -> list[str]:
    """The client namespace's conntrack entries whose reply comes from one of ``ports``."""

    def dump() -> list[str]:
        ct = Conntrack()
        try:
            return [str(e) for e in ct.dump_entries() if e.tuple_reply.sport in ports]
        finally:
            ct.close()

    return run_in_netns(f"/run/netns/{pair.client_ns}", dump, timeout=30)


def killed_run_experiment(
    target: str,
    duration: float,
    configuration: dict[str, Any] | None = None,
    secrets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A run that injects NXDOMAIN for ``a.*`` and then waits (to be SIGKILLed meanwhile)."""
    provider: dict[str, Any] = {
        "type": "python",
        "module": "chaos_ext.dns.actions",
        "func": "inject_dns_errors",
        "arguments": {
            "patterns": ["a.*"],
            "error": "nxdomain",
            "target": target,
            "resolvers": [SERVER_IP],
            "duration_seconds": duration,
        },
    }
    experiment: dict[str, Any] = {
        "title": "DNS errors, runner killed",
        "description": "the fault must end at its deadline, or be found without a ledger",
    }
    if configuration:
        experiment["configuration"] = configuration
    if secrets:
        experiment["secrets"] = {"target": secrets}
        provider["secrets"] = ["target"]
    experiment["method"] = [
        {"type": "action", "name": "nxdomain-for-a", "provider": provider},
        {
            "type": "probe",
            "name": "wait",
            "provider": {"type": "process", "path": "sleep", "arguments": "90", "timeout": 120},
        },
    ]
    return experiment


def run_then_kill(
    pair: ResolverPair,
    ledger_path: Path,
    tmp_path: Path,
    path: Path,
    prefix: Sequence[str] = (),
) -> tuple[str, float]:
    """Start ``gameday run`` (after ``prefix``), SIGKILL it once the table is there;
    (the table's name, when it appeared)."""
    runner = subprocess.Popen(
        [*prefix, *gameday_argv("run", "--journal", str(tmp_path / "journal.json"), str(path))],
        env=cli_env(ledger_path),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: len(netns_tables(pair.client_ns)) == 1, 90, "the run's table")
        seen = time.monotonic()
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)
    (table,) = netns_tables(pair.client_ns)
    return table.split()[1], seen
