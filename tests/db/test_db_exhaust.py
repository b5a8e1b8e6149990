"""exhaust_connections against real PostgreSQL 15 and MariaDB, counted on the server side."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from support.dbtest import MAX_CONNECTIONS, PASSWORD, Db
from support.harness import wait_for

from chaos_ext._core.helper import find_helpers
from chaos_ext._core.ledger import Ledger
from chaos_ext.db._engines import ConnectParams, capacity, close, connect, standing_capacity
from chaos_ext.db._holder import confirm_refusal, open_many
from chaos_ext.db.actions import exhaust_connections, release_connections

LIMIT_PHRASE = {
    "postgresql": "remaining connection slots are reserved for non-replication superuser",
    "mysql": "(1040) Too many connections",
}


RACE_TEXT = {"postgresql": ("sorry, too many clients already",)}


def test_max_stops_exactly_at_the_servers_refusal(db: Db, ledger_path: Path) -> None:
    capacity = db.free_for_user()
    assert capacity == MAX_CONNECTIONS - (3 if db.engine == "postgresql" else 0) - 1

    report = exhaust_connections(**db.args(target="max", hold_seconds=60), secrets=db.secrets)

    assert report["opened"] == capacity
    assert report["refused"] is True
    assert report["stopped_by"] == "limit"
    assert report["refused_at"] == capacity
    assert report["refusals"] >= 1
    assert report["max_connections"] == MAX_CONNECTIONS
    assert report["free_after"] == 0
    # the server really holds exactly that many more, and refuses the next one the same way
    assert db.client_count() == 1 + capacity
    refusal = db.refusal_text()
    assert LIMIT_PHRASE[db.engine] in refusal
    # with connections starting concurrently, PostgreSQL may give its other refusal text
    # to the one that finds every backend slot (reserved ones included) in use
    assert report["error_text"] in {refusal, *RACE_TEXT.get(db.engine, ())}
    assert report["seconds_to_target"] < 30

    release_connections()
    wait_for(lambda: db.client_count() == 1, 10, "the connection count back at its baseline")
    assert Ledger(ledger_path).open_entries() == []


def test_max_minus_5_leaves_exactly_5_free(db: Db) -> None:
    capacity = db.free_for_user()
    report = exhaust_connections(
        **db.args(target="max-minus-5", hold_seconds=60, open_concurrency=8), secrets=db.secrets
    )
    assert report["opened"] == report["target_count"] == capacity - 5
    assert report["refused"] is False
    assert report["free_after"] == 5

    extra = [db.user_connect() for _ in range(5)]  # the five left free
    try:
        assert LIMIT_PHRASE[db.engine] in db.refusal_text()  # and not one more
    finally:
        for conn in extra:
            conn.close()
    release_connections()
    wait_for(lambda: db.client_count() == 1, 10, "the connection count back at its baseline")


def test_refill_takes_back_the_slots_others_free(db: Db) -> None:
    others = [db.user_connect() for _ in range(3)]  # another client holds 3 slots
    capacity = db.free_for_user()
    report = exhaust_connections(
        **db.args(target="max", hold_seconds=60, refill_seconds=0.5), secrets=db.secrets
    )
    assert report["opened"] == capacity and report["refused"] is True
    ids = [db.client_id(c) for c in others]
    for conn in others:
        conn.close()  # the other client goes away: its 3 slots are free for a moment
    # the server ends those sessions a moment after the close: until then "no free slot"
    # would be true without the holder doing anything
    wait_for(lambda: db.ids_gone(ids), 10, "the server to end the other client's sessions")
    wait_for(lambda: db.free_for_user() == 0, 10, "the holder to take the freed slots back")
    assert db.client_count() == 1 + capacity + 3
    assert LIMIT_PHRASE[db.engine] in db.refusal_text()
    release_connections()
    wait_for(lambda: db.client_count() == 1, 10, "the connection count back at its baseline")


@pytest.mark.rolls_back("db-connections")
@pytest.mark.undoes("db-connections")
def test_numeric_target_with_keepalive_then_undo_returns_to_baseline(db: Db) -> None:
    report = exhaust_connections(
        **db.args(target=12, hold_seconds=60, keepalive_seconds=1), secrets=db.secrets
    )
    assert report["opened"] == 12
    assert report["reached_target"] is True
    assert db.client_count() == 1 + 12
    time.sleep(3.5)
    sessions = db.user_sessions()
    assert len(sessions) == 12
    # every held connection ran its keep-alive within the last ~2 s (none idle since opening)
    assert all(idle < 2.5 for _, idle in sessions), sessions

    assert release_connections(engine=db.engine)["undone"] == 1
    wait_for(lambda: db.client_count() == 1, 10, "the connection count back at its baseline")
    assert find_helpers(report["ledger_id"]) == []
    # releasing again is a no-op
    assert release_connections()["undone"] == 0


def test_without_keepalive_connections_stay_idle(db: Db) -> None:
    exhaust_connections(**db.args(target=4, hold_seconds=60), secrets=db.secrets)
    time.sleep(2.5)
    idle = sorted(seconds for _, seconds in db.user_sessions())
    assert len(idle) == 4
    assert idle[0] >= 2.0  # nobody touched them (the report's own query ran before the wait)
    release_connections()


def test_the_hold_ends_by_itself_after_hold_seconds(db: Db, ledger_path: Path) -> None:
    report = exhaust_connections(**db.args(target=3, hold_seconds=2), secrets=db.secrets)
    assert db.client_count() == 4
    wait_for(lambda: db.client_count() == 1, 10, "the holder to let go at its time cap")
    wait_for(lambda: not find_helpers(report["ledger_id"]), 10, "the holder to exit")
    # the duration timer closes the ledger entry too
    wait_for(lambda: not Ledger(ledger_path).open_entries(), 5, "the entry closed")


def test_password_stays_out_of_the_helper_and_the_ledger(db: Db, ledger_path: Path) -> None:
    report = exhaust_connections(**db.args(target=2, hold_seconds=60), secrets=db.secrets)
    pid = report["helper_pid"]
    assert find_helpers(report["ledger_id"]) == [pid]
    secret = PASSWORD.encode()
    assert secret not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert secret not in Path(f"/proc/{pid}/environ").read_bytes()
    assert PASSWORD not in repr(report)
    release_connections()
    raw = b"".join(p.read_bytes() for p in ledger_path.parent.glob(ledger_path.name + "*"))
    assert raw  # the ledger really was written
    assert secret not in raw


@pytest.mark.parametrize("concurrency", [1, 32])
def test_refusal_point_does_not_depend_on_concurrency(db: Db, concurrency: int) -> None:
    capacity = db.free_for_user()
    report = exhaust_connections(
        **db.args(target="max", hold_seconds=60, open_concurrency=concurrency),
        secrets=db.secrets,
    )
    assert report["opened"] == capacity
    # the burst's in-flight attempts, plus the lone one that confirms the refusal
    assert report["refusals"] <= concurrency + (concurrency > 1)
    release_connections()


def test_a_burst_refusal_is_confirmed_one_at_a_time(db: Db) -> None:
    """Slots freed after the burst was refused are taken; the lone attempt's refusal counts."""
    s = db.server
    params = ConnectParams(db.engine, s.host, s.port, s.database, s.user, s.password)
    capacity = db.free_for_user()
    stop = threading.Event()
    others = [db.user_connect() for _ in range(3)]  # another client holds 3 slots
    wanted = capacity + 1  # one more than fits, as "max" asks
    burst = open_many(params, wanted, 8, time.monotonic() + 30, stop)
    conns = list(burst.conns)
    try:
        assert burst.failure is not None and burst.failure.limit
        assert len(burst.conns) <= capacity - 3
        # one at a time from the start: nothing to confirm
        assert confirm_refusal(params, burst, wanted, 1, time.monotonic() + 30, stop) is burst
        for other in others:
            close(other)
        wait_for(lambda: db.client_count() == 1 + len(burst.conns), 10, "the 3 slots freed")

        confirmed = confirm_refusal(params, burst, wanted, 8, time.monotonic() + 30, stop)
        conns = list(confirmed.conns)
        assert len(confirmed.conns) == capacity
        assert confirmed.failure is not None and confirmed.failure.limit
        assert confirmed.failures == burst.failures + 1
        assert confirmed.burst_refused_at == 1 + len(burst.conns)
        assert db.client_count() == 1 + capacity
    finally:
        for conn in others + conns:
            close(conn)


def test_a_per_request_client_is_not_counted_as_in_use_a_standing_one_is(db: Db) -> None:
    """max-minus-N reads the server's use; a connection open during one reading only (a
    per-request client) must not count, or N + 1 slots would stay free (the incident replay)."""
    s = db.server
    params = ConnectParams(db.engine, s.host, s.port, s.database, s.user, s.password)
    probe = connect(params)
    standing = db.user_connect()
    try:
        baseline = capacity(probe, db.engine).in_use
        brief = db.user_connect()
        assert capacity(probe, db.engine).in_use == baseline + 1  # one reading counts it
        # closed 0.4 s into the readings, which are 1.2 s apart: the first reading (on an open
        # connection, milliseconds) sees it, the later ones do not (3x margin each way)
        closer = threading.Timer(0.4, brief.close)
        closer.start()
        try:
            read = standing_capacity(probe, db.engine, samples=3, gap_s=1.2)
        finally:
            closer.join()
        assert read.in_use == baseline  # the brief one not counted, the standing one is
        close(standing)
        standing = None
        wait_for(lambda: capacity(probe, db.engine).in_use == baseline - 1, 10, "standing gone")
        assert standing_capacity(probe, db.engine, samples=2, gap_s=0.1).in_use == baseline - 1
    finally:
        if standing is not None:
            close(standing)
        close(probe)
