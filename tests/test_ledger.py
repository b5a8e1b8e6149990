"""The fault ledger: durable entries, idempotent undo, failure handling."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.harness import netns_list, wait_for

from chaos_ext._core.ledger import (
    Entry,
    Ledger,
    current_run_id,
    fault,
    process_start_time,
    set_current_run_id,
    undo,
    undo_after,
    undo_handler,
)
from chaos_ext._core.ledger.entry import process_state
from chaos_ext.errors import LedgerError

pytestmark = pytest.mark.orphans

CALLS: list[str] = []


@undo_handler("unit-flaky")
def _flaky(entry: Entry) -> str:
    CALLS.append(entry.id)
    if entry.recipe.get("fail"):
        raise RuntimeError("device busy")
    return "gone"


def test_record_is_visible_to_another_process(ledger_path: Path) -> None:
    entry = Ledger(ledger_path).record(
        kind="unit-flaky", target="t1", recipe={"x": 1}, module=__name__
    )
    # a separate process (a later `gameday rollback`) sees the committed row
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sqlite3,sys; db=sqlite3.connect(sys.argv[1]);"
            "print(db.execute('select id, kind, state, owner_pid from entries').fetchall())",
            str(ledger_path),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert entry.id in out.stdout
    assert "'open'" in out.stdout
    assert str(os.getpid()) in out.stdout


def test_synchronous_full_and_wal(ledger_path: Path) -> None:
    Ledger(ledger_path)
    db = sqlite3.connect(ledger_path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_undo_closes_and_is_idempotent(ledger_path: Path) -> None:
    book = Ledger(ledger_path)
    entry = book.record(kind="unit-flaky", target="t", recipe={}, module=__name__)
    CALLS.clear()
    first = undo(entry, book)
    second = undo(entry, book)
    assert first.ok and second.ok
    assert CALLS == [entry.id]  # the handler ran once; the second undo saw a closed entry
    assert book.open_entries() == []
    assert book.get(entry.id).state == "closed"  # type: ignore[union-attr]


def test_failed_undo_keeps_entry_open_with_error(ledger_path: Path) -> None:
    book = Ledger(ledger_path)
    entry = book.record(kind="unit-flaky", target="t", recipe={"fail": True}, module=__name__)
    outcome = undo(entry, book)
    assert not outcome.ok
    assert "device busy" in outcome.note
    (still,) = book.open_entries()
    assert still.last_error is not None and "device busy" in still.last_error


def test_unknown_kind_is_a_failed_undo_not_a_crash(ledger_path: Path) -> None:
    book = Ledger(ledger_path)
    entry = book.record(kind="nobody-knows", target="t", recipe={}, module="json")
    outcome = undo(entry, book)
    assert not outcome.ok
    assert "no fault kind" in outcome.note


def test_fault_context_undoes_a_partial_injection(ledger_path: Path) -> None:
    CALLS.clear()
    with (
        pytest.raises(ValueError, match="half-applied"),
        fault(kind="unit-flaky", target="t", recipe={}, module=__name__) as entry,
    ):
        raise ValueError("half-applied")
    assert CALLS == [entry.id]
    assert Ledger(ledger_path).open_entries() == []


def test_a_timer_closes_its_entry_in_the_ledger_it_was_recorded_in(
    ledger_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rule: an entry is closed where it was written, whatever the default ledger is by then
    (a timed fault of one run must not read, or be refused by, a later run's ledger)."""
    entry = Ledger(ledger_path).record(kind="unit-flaky", target="t", recipe={}, module=__name__)
    CALLS.clear()
    timer = undo_after(entry, 0.3)
    other = tmp_path / "other" / "ledger.sqlite3"
    monkeypatch.setenv("GAMEDAY_LEDGER", str(other))  # the next test's, or the next run's
    timer.join(10)
    assert CALLS == [entry.id]
    assert Ledger(ledger_path).get(entry.id).state == "closed"  # type: ignore[union-attr]
    assert not other.exists()


def test_a_timer_ends_its_fault_at_the_deadline_even_if_the_ledger_is_damaged(
    ledger_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Rule: a fault with a duration never outlives it because its record was damaged: the
    timer undoes it from what it holds and logs why the ledger could not say so (no
    exception escapes the timer's thread: pytest fails a test on one)."""
    entry = Ledger(ledger_path).record(kind="unit-flaky", target="t", recipe={}, module=__name__)
    CALLS.clear()
    timer = undo_after(entry, 0.3)
    ledger_path.unlink()
    with caplog.at_level("ERROR", logger="chaostoolkit"):
        timer.join(10)
    assert CALLS == [entry.id]
    assert "could not record it" in caplog.text and entry.id in caplog.text


def test_owner_alive_tells_dead_from_recycled(ledger_path: Path) -> None:
    book = Ledger(ledger_path)
    entry = book.record(kind="unit-flaky", target="t", recipe={}, module=__name__)
    assert entry.owner_alive()
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    dead_pid = int(proc.stdout)
    dead = Entry(**{**entry.__dict__, "owner_pid": dead_pid, "owner_start": 1})
    assert not dead.owner_alive()
    recycled = Entry(
        **{**entry.__dict__, "owner_start": (process_start_time(os.getpid()) or 0) + 1}
    )
    assert not recycled.owner_alive()


def test_run_id_scoping(ledger_path: Path) -> None:
    book = Ledger(ledger_path)
    set_current_run_id("run-a")
    try:
        a = book.record(kind="unit-flaky", target="a", recipe={}, module=__name__)
    finally:
        set_current_run_id(None)
    b = book.record(kind="unit-flaky", target="b", recipe={}, module=__name__)
    assert b.run_id == current_run_id() != "run-a"
    assert [e.id for e in book.open_entries(run_id="run-a")] == [a.id]
    assert {e.id for e in book.open_entries()} == {a.id, b.id}


def test_unwritable_location_is_a_ledger_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(LedgerError, match="cannot open the fault ledger"):
        Ledger(blocker / "sub" / "ledger.sqlite3")


def test_a_zombie_owner_is_dead_and_the_next_run_recovers_its_fault(
    ledger_path: Path,
    tmp_path: Path,
    netns_name: str,
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """Issue 22, defect 6: a killed runner not yet reaped by its parent is a zombie."""
    code = (
        "import os, signal, sys; sys.path.insert(0, sys.argv[2]);"
        "from support.faultkit import create_netns; create_netns(sys.argv[1]);"
        "print('injected', flush=True); os.kill(os.getpid(), signal.SIGKILL)"
    )
    tests = str(Path(__file__).parent)
    child = subprocess.Popen(
        [sys.executable, "-c", code, netns_name, tests], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "injected\n"
        wait_for(lambda: (process_state(child.pid) or ("?",))[0] == "Z", 10, "a zombie")
        (entry,) = Ledger(ledger_path).open_entries()
        assert entry.owner_pid == child.pid
        assert not entry.owner_alive()
        listed = gameday("ledger")
        assert f"{child.pid} (dead)" in listed.stdout
        quiet = tmp_path / "quiet.json"
        quiet.write_text(json.dumps({"title": "q", "description": "-", "method": []}))
        result = gameday("run", "--journal", "q.json", str(quiet))
        assert result.returncode == 0, result.stderr
        assert "left open by a dead run" in result.stderr
        assert netns_name not in netns_list()
    finally:
        child.wait(timeout=10)  # reap it only now


def test_a_fault_held_on_another_machine_is_refused_a_rebooted_ones_closes(
    ledger_path: Path, netns_name: str
) -> None:
    """Issue 22, point 1, for faults held by this machine (helpers, namespaces, qdiscs)."""
    from chaos_ext._core.ledger import machine_scope  # noqa: PLC0415
    from chaos_ext._core.ledger.machine import machine_identity  # noqa: PLC0415

    subprocess.run(["ip", "netns", "add", netns_name], check=True, timeout=10)
    book = Ledger(ledger_path)
    here = machine_identity()
    elsewhere = {**machine_scope(), "machine": {**here, "hostname": "another-host"}}
    rebooted = {**machine_scope(), "machine": {**here, "boot_id": "0" * 36}}
    far = book.record(
        kind="test-netns",
        target=netns_name,
        recipe={"name": netns_name},
        module="support.faultkit",
        identity=elsewhere,
    )
    outcome = undo(far, book)
    assert not outcome.ok and "TargetMismatch" in outcome.note and "another-host" in outcome.note
    assert netns_name in netns_list()  # the namespace of this host was not touched
    old = book.record(
        kind="test-netns",
        target=netns_name,
        recipe={"name": netns_name},
        module="support.faultkit",
        identity=rebooted,
    )
    outcome = undo(old, book)
    assert outcome.ok and "rebooted" in outcome.note
    assert netns_name in netns_list()  # a fault from before the reboot is gone: nothing run
    subprocess.run(["ip", "netns", "delete", netns_name], check=True, timeout=10)
