"""Fixtures: a real dnsmasq, the real HTTP app resolving over TCP DNS, nothing left behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.dns_checks import RECORDS, ZONES
from support.envelope_app import DnsBackedApp

from chaos_ext._core.helper import find_helpers, stop_helpers
from chaos_ext._core.ledger import Ledger
from chaos_ext._products.sandbox.servers import dnsmasq


@pytest.fixture
def dns_server() -> Iterator[dnsmasq.Dnsmasq]:
    """A real Debian dnsmasq on 127.0.0.1 and a free port (20 TCP children at most)."""
    with dnsmasq.start(records=RECORDS, local_domains=ZONES) as server:
        yield server


@pytest.fixture
def fragile_app(dns_server: dnsmasq.Dnsmasq) -> Iterator[DnsBackedApp]:
    """Resolves over TCP on every request: breaks at dnsmasq's 20 held connections."""
    with DnsBackedApp(dns_server.address, dns_server.port) as app:
        yield app


@pytest.fixture
def clean_ledger(ledger_path: Path) -> Iterator[Path]:
    """The test's ledger; afterwards every entry is closed and no helper runs."""
    yield ledger_path
    entries = Ledger(ledger_path).history() if ledger_path.exists() else []
    left = {entry.id: find_helpers(entry.id) for entry in entries}
    still_open = [entry.id for entry in entries if entry.state != "closed"]
    for entry in entries:
        stop_helpers(entry.id)
    assert not any(left.values()), f"helpers left behind: {left}"
    assert not still_open, f"ledger entries left open: {still_open}"
