"""Real PostgreSQL 15 and MariaDB servers (max_connections=40), one per engine per session.

Every test starts and ends at the server's baseline connection count: the
``db`` fixture checks it, and undoes whatever a failing test left in its ledger.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.dbtest import MAX_CONNECTIONS, PASSWORD, Db
from support.harness import wait_for
from support.servers import mariadb

from chaos_ext._core.ledger import Ledger, undo
from chaos_ext._products.sandbox.servers import postgres


@pytest.fixture(scope="session")
def pg_server() -> Iterator[postgres.PostgresServer]:
    with postgres.start(password=PASSWORD, max_connections=MAX_CONNECTIONS) as server:
        yield server


@pytest.fixture(scope="session")
def maria_server() -> Iterator[mariadb.MariaDBServer]:
    with mariadb.start(password=PASSWORD, max_connections=MAX_CONNECTIONS) as server:
        yield server


@pytest.fixture(scope="session")
def pg_admin(pg_server: postgres.PostgresServer) -> Iterator[Any]:
    with pg_server.admin_connect() as conn:
        yield conn


@pytest.fixture(scope="session")
def maria_admin(maria_server: mariadb.MariaDBServer) -> Iterator[Any]:
    conn = maria_server.admin_connect()
    yield conn
    conn.close()


@pytest.fixture(params=["postgresql", "mysql"])
def db(request: pytest.FixtureRequest, ledger_path: Path) -> Iterator[Db]:
    """Each engine in turn, at its baseline; whatever the test left is undone and checked."""
    if request.param == "postgresql":
        handle = Db(
            "postgresql", request.getfixturevalue("pg_server"), request.getfixturevalue("pg_admin")
        )
    else:
        handle = Db(
            "mysql", request.getfixturevalue("maria_server"), request.getfixturevalue("maria_admin")
        )
    baseline = 1  # only the admin connection
    wait_for(lambda: handle.client_count() == baseline, 15, "the server at its baseline")
    yield handle
    book = Ledger(ledger_path)
    leftovers = book.open_entries()
    for entry in leftovers:
        undo(entry, book)
    wait_for(lambda: handle.client_count() == baseline, 15, "the server back at its baseline")
    assert not leftovers, f"the test left faults open: {[e.kind for e in leftovers]}"
