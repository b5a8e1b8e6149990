"""Fixtures for the load driver tests: a controllable HTTP target and leak checks."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.k8s_emulator import emulator  # noqa: F401 - the fixture, for the Job tests
from support.servers import http_target
from support.servers.http_target import HttpTarget

from chaos_ext._core.helper import find_helpers, stop_helpers
from chaos_ext._core.ledger import Ledger


@pytest.fixture
def target() -> Iterator[HttpTarget]:
    """A real aiohttp server on a free loopback port with latency/error controls."""
    with http_target.start() as server:
        yield server


@pytest.fixture
def load_token() -> Iterator[Callable[[], str]]:
    """Fresh helper tokens; the test fails if one of their processes outlives it."""
    tokens: list[str] = []

    def new() -> str:
        token = f"test-load-{uuid.uuid4().hex[:10]}"
        tokens.append(token)
        return token

    yield new
    leaked = {t: find_helpers(t) for t in tokens if find_helpers(t)}
    for token in leaked:
        stop_helpers(token)
    assert not leaked, f"load processes left running: {leaked}"


@pytest.fixture
def no_leaked_loads(ledger_path: Path) -> Iterator[Path]:
    """The test's ledger; fails the test if a recorded load still has processes."""
    yield ledger_path
    if not ledger_path.exists():
        return
    leaked = {}
    for entry in Ledger(ledger_path).history(limit=1000):
        if entry.kind == "http-load" and find_helpers(entry.id):
            leaked[entry.id] = find_helpers(entry.id)
            stop_helpers(entry.id)
    assert not leaked, f"load processes left running: {leaked}"
