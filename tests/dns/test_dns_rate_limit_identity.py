"""Ownership by identity, never by spelling (issue 27, item 1), on real namespaces and nftables.

Run A limits DNS in a namespace under one spelling (``netns:NAME``,
``pid:PID`` of a process inside it, ``netns:ALIAS`` bound by ``ip netns
attach``) and stays alive; run B, this test process, rolls back under
another spelling, with A's ledger or with a ledger of its own. B must never
delete A's table, whichever pair of spellings and ledgers; once A is dead,
its table is left alone until someone asks for dead runs (by any spelling)
or uses A's ledger. The ruleset is read with Debian's ``nft`` CLI, not
through the code under test.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.dns_netlab import netns_tables
from support.harness import cli_env, wait_for
from support.netns_spellings import SPELLINGS, Spelled, spelled_namespace

from chaos_ext._core.ledger import Ledger
from chaos_ext._core.targets.identity import key_of_path
from chaos_ext.dns.actions import limit_dns_rate, remove_dns_rate_limit

pytestmark = [pytest.mark.timeout(120), pytest.mark.orphans]

_RUN_A = """
import sys, time
from chaos_ext._core.targets.identity import key_of_path
from chaos_ext.dns.actions import limit_dns_rate
done = limit_dns_rate(pps=100, target=sys.argv[1])
print(done["table"].split()[1], done["ledger_id"], flush=True)
time.sleep(120)
"""


@pytest.fixture
def ns() -> Iterator[Spelled]:
    with spelled_namespace() as made:
        yield made


def _start_a(target: str, ledger: Path) -> tuple[subprocess.Popen[str], str, str]:
    """Run A, alive until killed: (process, its table, its entry id)."""
    run_a = subprocess.Popen(
        [sys.executable, "-c", _RUN_A, target],
        stdout=subprocess.PIPE,
        text=True,
        env=cli_env(ledger),
    )
    assert run_a.stdout is not None
    table, entry_id = run_a.stdout.readline().split()
    return run_a, table, entry_id


def _tables(ns: Spelled) -> list[str]:
    return [t.split()[1] for t in netns_tables(ns.name)]


PAIRS = [(a, b) for a, b in itertools.product(SPELLINGS, SPELLINGS) if a != b]


@pytest.mark.parametrize("ledgers", ["one ledger", "two ledgers"])
@pytest.mark.parametrize(("spelled_a", "spelled_b"), PAIRS)
def test_a_rollback_spelled_otherwise_never_takes_a_live_runs_limit(
    ns: Spelled,
    spelled_a: str,
    spelled_b: str,
    ledgers: str,
    ledger_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger_b = ledger_path if ledgers == "one ledger" else tmp_path / "b" / "ledger.sqlite3"
    run_a, table, entry_id = _start_a(ns.spell(spelled_a), ledger_path)
    monkeypatch.setenv("GAMEDAY_LEDGER", str(ledger_b))
    try:
        for dead_too in (False, True):
            removed = remove_dns_rate_limit(target=ns.spell(spelled_b), include_dead_runs=dead_too)
            assert removed["undone"] == 0, removed
            assert _tables(ns) == [table]  # A's limit is untouched
            (kept,) = removed["unrecorded"]
            assert f"table {table} left alone: open entry {entry_id}" in kept
            assert "its runner is alive" in kept and str(ledger_path) in kept
            alone = [a["ledger_id"] for a in removed["left_alone"]]
            assert alone == ([entry_id] if ledger_b == ledger_path else []), removed
    finally:
        run_a.kill()
        run_a.wait(timeout=10)
    # A is dead: its entry still owns the table until someone takes dead runs' faults
    kept = remove_dns_rate_limit(target=ns.spell(spelled_b))["unrecorded"]
    assert _tables(ns) == [table] and "its runner is dead" in kept[0], kept
    monkeypatch.setenv("GAMEDAY_LEDGER", str(ledger_path))  # A's ledger (the same in one)
    removed = remove_dns_rate_limit(target=ns.spell(spelled_b), include_dead_runs=True)
    assert removed["undone"] == 1 and removed["unrecorded"] == [], removed  # by namespace
    assert _tables(ns) == []
    assert Ledger(ledger_path).open_entries() == []


def test_the_undo_finds_the_namespace_when_the_pid_it_was_spelled_by_is_gone(
    ledger_path: Path,
) -> None:
    """A ``pid:`` target whose process ended: the namespace lives on under its name."""
    with spelled_namespace() as ns:
        limited = limit_dns_rate(pps=100, target=ns.spell("pid"))
        table = limited["table"].split()[1]
        os.kill(ns.pid, signal.SIGKILL)  # a zombie until the fixture reaps it: no namespace
        wait_for(lambda: key_of_path(f"/proc/{ns.pid}/ns/net") is None, 10, "the pid to end")
        assert _tables(ns) == [table]
        removed = remove_dns_rate_limit(target=ns.spell("name"))
        assert removed["undone"] == 1, removed
        assert removed["faults"][0]["note"].endswith(f"table inet {table} deleted"), removed
        assert _tables(ns) == []


def test_a_lost_ledger_is_swept_and_an_unreadable_one_stops_the_sweep(
    ns: Spelled, ledger_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger_a = tmp_path / "a" / "ledger.sqlite3"
    run_a, table, _ = _start_a(ns.spell("pid"), ledger_a)
    run_a.kill()
    run_a.wait(timeout=10)
    ledger_a.write_bytes(b"not a database" * 100)  # damaged, and no event log to read instead
    ledger_a.with_name("ledger.sqlite3.events.jsonl").unlink()
    kept = remove_dns_rate_limit(target=ns.spell("name"))["unrecorded"]
    assert _tables(ns) == [table]
    assert "left alone: a ledger that cannot be read may own them" in kept[0], kept
    ledger_a.unlink()  # now lost for good (only its marker is left): the table is an orphan
    swept = remove_dns_rate_limit(target=ns.spell("alias"))["unrecorded"]
    assert swept == [f"netns:{ns.alias}: table {table} without a ledger entry deleted"]
    assert _tables(ns) == []
