"""plan_exhaust_connections on the real servers: exact counts, nothing held, nothing recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.dbtest import MAX_CONNECTIONS, Db
from support.harness import wait_for

from chaos_ext._core.ledger import Ledger
from chaos_ext.db.actions import exhaust_connections, release_connections
from chaos_ext.db.plan import plan_exhaust_connections


def _ledger_bytes(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


@pytest.mark.parametrize("target", ["max", "max-minus-5", 7])
def test_plan_counts_exactly_what_the_action_then_holds(
    db: Db, ledger_path: Path, target: int | str
) -> None:
    before_ledger, before_count = _ledger_bytes(ledger_path), db.client_count()

    plan = plan_exhaust_connections(**db.args(target=target, hold_seconds=30), secrets=db.secrets)

    # touched nothing: no entry, no connection left behind, the ledger file byte-identical
    assert _ledger_bytes(ledger_path) == before_ledger
    wait_for(lambda: db.client_count() == before_count, 5, "the plan's connection closed")
    radius = plan["blast_radius"]
    assert radius["max_connections"] == MAX_CONNECTIONS
    reserved = getattr(db.server, "superuser_reserved_connections", 0)
    assert radius["superuser_reserved_connections"] == reserved
    assert radius["in_use"] == before_count  # the admin connection, not the plan's own
    assert radius["free_for_this_user"] == db.free_for_user()
    assert all(p["ok"] for p in plan["preflight"]), plan["preflight"]

    # the run holds exactly what the plan said
    done = exhaust_connections(**db.args(target=target, hold_seconds=30), secrets=db.secrets)
    try:
        assert done["opened"] == radius["would_hold"], (done, radius)
    finally:
        release_connections()


def test_plan_with_a_wrong_password_fails_its_preflight_and_holds_nothing(
    db: Db, ledger_path: Path
) -> None:
    secrets = {**db.secrets, "password": "not-the-password"}
    plan = plan_exhaust_connections(**db.args(), secrets=secrets)
    (connect,) = plan["preflight"]
    assert connect["check"] == "connect" and not connect["ok"]
    assert "not-the-password" not in str(plan)
    assert Ledger(ledger_path).open_entries() == []
