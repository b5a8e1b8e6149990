"""Fixtures for `gameday advise`: an emulated cluster behind the real client, a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.advise_cluster import PASSWORD
from support.k8s_emulator import emulator  # noqa: F401 - the fixture

from chaos_ext._products.sandbox.servers import postgres


@pytest.fixture(scope="session")
def pg100() -> Iterator[postgres.PostgresServer]:
    """A real PostgreSQL with max_connections=100 (3 reserved for superusers: 97 usable)."""
    with postgres.start(password=PASSWORD, max_connections=100) as server:
        yield server


@pytest.fixture
def dsn(pg100: postgres.PostgresServer) -> str:
    return f"postgresql://{pg100.user}:{PASSWORD}@{pg100.host}:{pg100.port}/{pg100.database}"
