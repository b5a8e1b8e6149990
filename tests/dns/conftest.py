"""Fixtures: a real Debian dnsmasq per test, an isolated ledger, no helper left behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.dns_checks import RECORDS, ZONES

from chaos_ext._core.helper import find_helpers, stop_helpers
from chaos_ext._core.ledger import Ledger
from chaos_ext._products.sandbox.servers import dnsmasq


@pytest.fixture
def dns_server() -> Iterator[dnsmasq.Dnsmasq]:
    """dnsmasq on 127.0.0.1 and a free port, logging every query; stopped after the test."""
    with dnsmasq.start(records=RECORDS, local_domains=ZONES, log_queries=True) as server:
        yield server


@pytest.fixture
def dns_ledger(ledger_path: Path) -> Iterator[Path]:
    """The test's own ledger; afterwards no helper of its entries may still run."""
    yield ledger_path
    entries = Ledger(ledger_path).history() if ledger_path.exists() else []
    left = {entry.id: find_helpers(entry.id) for entry in entries}
    for entry in entries:
        stop_helpers(entry.id)
    assert not any(left.values()), f"helpers left behind: {left}"
