"""The ledger proves what it says: event log, marker, reconciliation, repair (issue 22).

Every damage here is done to the real files with ordinary file operations, and
every crash is a real SIGKILL of a real process (a failpoint between the event
log and the database).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from chaos_ext._core import ledger as fault_ledger
from chaos_ext._core.ledger import Ledger
from chaos_ext._core.ledger.book import events_path
from chaos_ext._core.ledger.marker import marker_path, read_marker
from chaos_ext.errors import LedgerInconsistent

pytestmark = pytest.mark.orphans

RECORD = """
import sys
from chaos_ext._core.ledger import Ledger
book = Ledger()
for i in range(int(sys.argv[1])):
    book.record(kind="unit-crash", target=f"t{i}", recipe={"i": i}, module="json")
print("done", flush=True)
"""


def _record_in_child(ledger_path: Path, count: int, failpoints: str = "") -> int:
    env = {**os.environ, "GAMEDAY_LEDGER": str(ledger_path)}
    if failpoints:
        env["GAMEDAY_FAILPOINTS"] = failpoints
    proc = subprocess.run(
        [sys.executable, "-c", RECORD, str(count)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return proc.returncode


def _three(ledger_path: Path) -> Ledger:
    book = Ledger(ledger_path)
    for i in range(3):
        book.record(kind="unit-crash", target=f"t{i}", recipe={"i": i}, module="json")
    return book


def test_a_write_killed_between_log_and_database_is_rolled_forward(ledger_path: Path) -> None:
    _three(ledger_path)
    assert _record_in_child(ledger_path, 1, "ledger.after-log=kill") == -9
    # the event is in the log, not in the database: the next open completes it
    book = Ledger(ledger_path)
    assert sorted(e.target for e in book.open_entries()) == ["t0", "t0", "t1", "t2"]
    assert book.verify().ok


def test_a_cut_short_last_line_is_dropped(ledger_path: Path) -> None:
    _three(ledger_path)
    with events_path(ledger_path).open("ab") as log:
        log.write(b'{"seq": 5, "ledger": "x", "ev')  # a write cut short
    book = Ledger(ledger_path)
    assert len(book.open_entries()) == 3
    assert book.verify().ok


def test_concurrent_writers_keep_one_gapless_sequence(ledger_path: Path) -> None:
    Ledger(ledger_path)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RECORD, "15"],
            env={**os.environ, "GAMEDAY_LEDGER": str(ledger_path)},
        )
        for _ in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    verdict = fault_ledger.verify(ledger_path, full=True)
    assert verdict.ok, verdict.problems
    assert verdict.log_seq == verdict.db_seq == 61  # create + 60 records
    assert len(verdict.suspects) == 60


def _problems(ledger_path: Path) -> LedgerInconsistent:
    with pytest.raises(LedgerInconsistent) as caught:
        Ledger(ledger_path).open_entries()
    return caught.value


def test_a_truncated_event_log_is_detected_and_rebuilt_from_the_database(
    ledger_path: Path,
) -> None:
    _three(ledger_path)
    log = events_path(ledger_path)
    log.write_bytes(log.read_bytes()[:100])
    error = _problems(ledger_path)
    assert "event log" in str(error)
    assert not fault_ledger.verify(ledger_path).ok
    notes = fault_ledger.repair(ledger_path)
    assert "rebuilt the event log from the database (3 entries)" in notes[0]
    assert len(Ledger(ledger_path).open_entries()) == 3
    assert fault_ledger.verify(ledger_path).ok


@pytest.mark.parametrize("what", ["database", "both"])
def test_a_deleted_ledger_is_detected_by_its_log_or_its_marker(
    what: str, ledger_path: Path
) -> None:
    _three(ledger_path)
    ledger_path.unlink()
    if what == "both":
        events_path(ledger_path).unlink()
    error = _problems(ledger_path)
    assert "the database is missing but the ledger existed" in str(error)
    expected = 3 if what == "database" else 0  # with the log gone, nothing can be listed
    assert len(error.suspects) == expected
    if what == "database":
        assert "rebuilt the database" in fault_ledger.repair(ledger_path)[0]
        assert len(Ledger(ledger_path).open_entries()) == 3
        return
    with pytest.raises(LedgerInconsistent, match="--accept-loss"):
        fault_ledger.repair(ledger_path)
    notes = fault_ledger.repair(ledger_path, accept_loss=True)
    assert "0 entries" in notes[0]
    assert Ledger(ledger_path).open_entries() == []


def test_both_files_replaced_by_older_copies_are_caught_by_the_marker(
    ledger_path: Path, tmp_path: Path
) -> None:
    book = _three(ledger_path)
    old = tmp_path / "backup"
    old.mkdir()
    for part in (ledger_path, events_path(ledger_path)):
        shutil.copy(part, old / part.name)
    book.record(kind="unit-crash", target="after-backup", recipe={}, module="json")
    for part in (ledger_path, events_path(ledger_path)):
        shutil.copy(old / part.name, part)
    error = _problems(ledger_path)
    assert "the marker has seen 5 events, the ledger only 4" in str(error)


def test_a_marker_for_another_ledger_is_caught(ledger_path: Path) -> None:
    _three(ledger_path)
    data = read_marker(ledger_path)
    assert data is not None
    marker_path(ledger_path).write_text(json.dumps({**data, "ledger_id": "f" * 32}))
    assert "its marker says" in str(_problems(ledger_path))


def test_an_entry_changed_behind_the_ledgers_back_is_a_disagreement(ledger_path: Path) -> None:
    book = _three(ledger_path)
    first = book.open_entries()[0]
    with closing(sqlite3.connect(ledger_path)) as db:
        db.execute("UPDATE entries SET state = 'closed' WHERE id = ?", (first.id,))
        db.commit()
    verdict = fault_ledger.verify(ledger_path)
    assert f"entry {first.id} (unit-crash on t0): state differs" in " ".join(verdict.problems)
    assert first.id in {e.id for e in verdict.suspects}  # open in the log: still a suspect


def test_a_ledger_of_the_previous_version_is_adopted(ledger_path: Path) -> None:
    with closing(sqlite3.connect(ledger_path)) as db:
        db.executescript(
            "CREATE TABLE entries (id TEXT PRIMARY KEY, kind TEXT NOT NULL, target TEXT NOT NULL,"
            " module TEXT NOT NULL, recipe TEXT NOT NULL, run_id TEXT NOT NULL,"
            " owner_pid INTEGER NOT NULL, owner_start INTEGER, created_at REAL NOT NULL,"
            " state TEXT NOT NULL DEFAULT 'open', closed_at REAL, note TEXT, last_error TEXT);"
            "INSERT INTO entries (id, kind, target, module, recipe, run_id, owner_pid,"
            " created_at) VALUES ('0123456789abcdef', 'netem', 'netns:a/eth0', 'x', '{}',"
            " 'old-run', 1, 1.0);"
        )
    (entry,) = Ledger(ledger_path).open_entries()
    assert (entry.id, entry.run_id, entry.identity) == ("0123456789abcdef", "old-run", None)
    assert fault_ledger.verify(ledger_path, full=True).ok


def test_gameday_ledger_verify_and_repair_from_the_cli(
    ledger_path: Path, gameday: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    _three(ledger_path)
    ok = gameday("ledger", "--verify")
    assert ok.returncode == 0, ok.stderr
    assert "3 entries, 3 open, 4 events" in ok.stderr
    ledger_path.write_bytes(b"")
    bad = gameday("ledger", "--json")
    assert bad.returncode == 2
    assert len(json.loads(bad.stdout)["suspects"]) == 3
    assert gameday("ledger", "--verify").returncode == 2
    fixed = gameday("ledger", "--repair")
    assert fixed.returncode == 0, fixed.stderr
    assert "3 entries, 3 open" in fixed.stderr
