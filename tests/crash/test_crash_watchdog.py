"""Crash-matrix rows for the dead-man switch (issue 27, item 2): faults end without gameday.

A real ``gameday run`` injects a fault, then waits in a pause; the test
SIGKILLs it (or SIGSTOPs it) and then runs **no gameday command**. What is
injected is read through the target's own interface, never the ledger:
``nft list tables`` in the namespace, ``ss`` for dnsmasq's TCP connections,
``pg_stat_activity`` counted by the test role (not by gameday's
``application_name``), the HTTP server's request counter.

* A SIGKILL during every timed fault (DNS rate limit, DNS TCP hold, DB
  connection hold, HTTP load): gone within its duration + 5 s of the moment
  it was first seen, though the grace period (60 s, the default) is far
  longer: the deadline ended it.
* An untimed fault (a DNS rate limit without duration) whose owner is
  killed: still there before the grace is over, gone within grace + 5 s.
* A SIGSTOPped owner: its fault is untouched long after the grace (and, for
  a timed one, its deadline); after SIGCONT the run's own timer or rollback
  removes it and the run ends normally.
* The watchdog and a concurrent ``gameday rollback`` on one entry, each one
  held in its undo by a failpoint while the other comes: exactly one undo is
  claimed (one ``close`` event in the event log; the other says it found the
  entry undone), and the fault is gone.

The netem row (a real latency tree) is in the VM lane (``test_crash_netem_vm.py``).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.crashkit import (
    PASSWORD,
    dns_errors_state,
    dns_hold_state,
    nft_state,
    pg_state,
    web_state,
)
from support.harness import cli_env, gameday_argv

from chaos_ext._core import ledger as fault_ledger
from chaos_ext._core.ledger import Ledger
from chaos_ext._core.watchdog import find_watchdogs

pytestmark = pytest.mark.timeout(300)

DURATION_S = 8.0  # each timed fault's duration
SLACK_S = 5.0  # the promise: gone within duration (or grace) + 5 s
PAUSE_S = 120  # the run waits this long after the action: it is killed long before


def _python(module: str, func: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "python", "module": f"chaos_ext.{module}", "func": func, "arguments": arguments}


@dataclass(frozen=True)
class Timed:
    """A timed fault: its fixture, its action, and what the target shows of it."""

    fixture: str
    action: Callable[[Any], dict[str, Any]]
    state: Callable[[Any], dict[str, Any]]
    env: Callable[[Any], dict[str, str]] = lambda target: {}


TIMED = {
    "dns-errors": Timed(
        "resolvers",
        lambda p: _python(
            "dns.actions",
            "inject_dns_errors",
            patterns=["www.*"],
            error="nxdomain",
            target=p.target,
            resolvers=["10.77.0.2"],
            duration_seconds=DURATION_S,
        ),
        dns_errors_state,
    ),
    "dns-rate-limit": Timed(
        "resolvers",
        lambda p: _python(
            "dns.actions", "limit_dns_rate", pps=100, target=p.target, duration_seconds=DURATION_S
        ),
        nft_state,
    ),
    "dnsmasq-tcp-hold": Timed(
        "dns_server",
        lambda s: _python(
            "dns.actions",
            "saturate_dnsmasq_tcp",
            server=s.address,
            port=s.port,
            connections=5,
            hold_seconds=DURATION_S,
        ),
        dns_hold_state,
    ),
    "db-connections": Timed(
        "pg_server",
        lambda s: {
            **_python(
                "db.actions",
                "exhaust_connections",
                engine="postgresql",
                host=s.host,
                port=s.port,
                database=s.database,
                target=10,
                hold_seconds=DURATION_S,
            ),
            "secrets": ["db"],
        },
        pg_state,
        env=lambda s: {"GD_CRASH_DB_USER": s.user, "GD_CRASH_DB_PASSWORD": PASSWORD},
    ),
    "http-load": Timed(
        "web",
        lambda s: _python(
            "load.actions",
            "drive_http_load",
            urls=[s.url],
            rate=20,
            duration_seconds=DURATION_S,
            timeout_seconds=2,
            processes=1,
        ),
        web_state,
    ),
}


def _experiment(provider: dict[str, Any], *, grace: float | None = None) -> dict[str, Any]:
    experiment: dict[str, Any] = {
        "title": "a fault whose runner dies",
        "description": "the dead-man switch (issue 27)",
        "method": [
            {"type": "action", "name": "inject", "provider": provider, "pauses": {"after": PAUSE_S}}
        ],
    }
    if "secrets" in provider:
        experiment["secrets"] = {
            "db": {
                "user": {"type": "env", "key": "GD_CRASH_DB_USER"},
                "password": {"type": "env", "key": "GD_CRASH_DB_PASSWORD"},
            }
        }
    if grace is not None:
        experiment["extensions"] = [{"name": "gameday", "watchdog_grace_seconds": grace}]
    return experiment


def _events(ledger: Path) -> list[dict[str, Any]]:
    """The event log's lines, read as a file (no lock, no gameday code)."""
    log = ledger.with_name(ledger.name + ".events.jsonl")
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _recorded_ids(ledger: Path) -> list[str]:
    return [e["id"] for e in _events(ledger) if e["event"] == "record"]


def _deadline_recorded(ledger: Path) -> bool:
    return any(
        e["event"] == "watchdog" and (e["data"].get("watchdog") or {}).get("deadline")
        for e in _events(ledger)
    )


def _poll(predicate: Callable[[], bool], timeout: float) -> float | None:
    """The monotonic time at which ``predicate`` was first seen true (its check started
    then), or None after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        at = time.monotonic()
        if predicate():
            return at
        time.sleep(0.1)
    return None


@contextmanager
def _run(
    experiment: dict[str, Any], tmp_path: Path, env: dict[str, str]
) -> Iterator[subprocess.Popen[str]]:
    path = tmp_path / "experiment.json"
    path.write_text(json.dumps(experiment))
    proc = subprocess.Popen(
        gameday_argv("run", "--journal", str(tmp_path / "journal.json"), str(path)),
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        with suppress(ValueError):  # already read by _said
            proc.communicate(timeout=30)


def _said(proc: subprocess.Popen[str]) -> str:
    """What a run that did not get as far as expected printed (it is killed first)."""
    proc.kill()
    output, _ = proc.communicate(timeout=30)
    return str(output)[-3000:]


def _closed_by_watchdog(ledger: Path, entry_id: str) -> str:
    """Once the fault is gone: the entry is closed, by its watchdog, which has exited.

    A helper that ends at its own cap may end a moment before its watchdog's deadline
    (recorded once the action returned): the entry is closed then.
    """

    def closed() -> bool:
        found = Ledger(ledger).get(entry_id)
        return found is not None and found.state == "closed"

    assert _poll(closed, 15) is not None, Ledger(ledger).get(entry_id)
    entry = Ledger(ledger).get(entry_id)
    assert entry is not None
    assert entry.watchdog and entry.watchdog.get("pid"), entry.watchdog
    assert _poll(lambda: not find_watchdogs(entry_id), 15) is not None, "the watchdog lingers"
    assert fault_ledger.verify(ledger, full=True).ok
    return str(entry.note)


@pytest.mark.parametrize("name", sorted(TIMED))
def test_a_timed_fault_ends_by_itself_after_a_sigkill(
    name: str, request: pytest.FixtureRequest, ledger_path: Path, tmp_path: Path
) -> None:
    row = TIMED[name]
    target = request.getfixturevalue(row.fixture)
    baseline = row.state(target)
    env = {**cli_env(ledger_path), **row.env(target)}
    with _run(_experiment(row.action(target)), tmp_path, env) as proc:
        seen = _poll(lambda: row.state(target) != baseline, 90)
        assert seen is not None, f"{name} never showed up on the target: {_said(proc)}"
        # the action has returned (its deadline is in the ledger); then the runner dies
        assert _poll(lambda: _deadline_recorded(ledger_path), 30) is not None
        time.sleep(1.0)
        proc.kill()
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        assert row.state(target) != baseline, f"{name} ended before the kill: a no-op would pass"
        gone = _poll(lambda: row.state(target) == baseline, DURATION_S + 60)
    assert gone is not None, f"{name} still there {DURATION_S + 60:.0f} s later"
    took = gone - seen
    print(f"{name}: gone {took:.1f} s after it was seen (duration {DURATION_S:g} s)")  # noqa: T201
    assert took <= DURATION_S + SLACK_S, f"{name} lasted {took:.1f} s"
    (entry_id,) = _recorded_ids(ledger_path)
    note = _closed_by_watchdog(ledger_path, entry_id)
    assert "watchdog pid" in note and "duration is over" in note, note


GRACE_S = 3.0


def _untimed_limit(resolvers: Any) -> dict[str, Any]:
    return _python("dns.actions", "limit_dns_rate", pps=100, target=resolvers.target)


def test_an_untimed_fault_of_a_killed_run_is_undone_after_the_grace(
    resolvers: Any, ledger_path: Path, tmp_path: Path
) -> None:
    baseline = nft_state(resolvers)
    experiment = _experiment(_untimed_limit(resolvers), grace=GRACE_S)
    with _run(experiment, tmp_path, cli_env(ledger_path)) as proc:
        assert _poll(lambda: nft_state(resolvers) != baseline, 60) is not None, _said(proc)
        time.sleep(1.0)
        proc.kill()
        proc.wait(timeout=10)
        killed = time.monotonic()
        # not at once: a dead owner's fault waits for the grace period
        time.sleep(GRACE_S / 2)
        assert nft_state(resolvers) != baseline, "undone before the grace was over"
        gone = _poll(lambda: nft_state(resolvers) == baseline, GRACE_S + 60)
    assert gone is not None, "the untimed fault outlived its dead run"
    print(f"untimed: gone {gone - killed:.1f} s after the kill (grace {GRACE_S:g} s)")  # noqa: T201
    assert gone - killed <= GRACE_S + SLACK_S
    (entry_id,) = _recorded_ids(ledger_path)
    note = _closed_by_watchdog(ledger_path, entry_id)
    assert "dead for" in note and "(grace)" in note, note


@pytest.mark.parametrize("duration", [0.0, 3.0])
def test_a_stopped_owner_keeps_its_fault_and_rolls_it_back_itself(
    duration: float, resolvers: Any, ledger_path: Path, tmp_path: Path
) -> None:
    """Untimed: past the grace; timed: past its deadline too. The owner lives: untouched."""
    baseline = nft_state(resolvers)
    provider = _untimed_limit(resolvers)
    if duration:
        provider["arguments"]["duration_seconds"] = duration
    experiment = _experiment(provider, grace=2.0)
    experiment["method"][0]["pauses"]["after"] = 20
    with _run(experiment, tmp_path, cli_env(ledger_path)) as proc:
        assert _poll(lambda: nft_state(resolvers) != baseline, 60) is not None, _said(proc)
        proc.send_signal(signal.SIGSTOP)
        time.sleep(max(2.0, duration) + 8.0)  # the grace or deadline, and well over 5 s more
        injected = nft_state(resolvers)
        (entry_id,) = _recorded_ids(ledger_path)
        watchdogs = find_watchdogs(entry_id)
        proc.send_signal(signal.SIGCONT)
        # a timed fault: the owner's own timer, overdue, fires at once; untimed: its rollback
        ended = _poll(lambda: nft_state(resolvers) == baseline, 15) if duration else None
        output, _ = proc.communicate(timeout=120)
    assert injected != baseline, "a stopped owner's fault was touched"
    assert watchdogs, "the watchdog left while its owner was only stopped"
    assert not duration or ended is not None, "the timer did not end it after SIGCONT"
    assert proc.returncode == 0, output[-3000:]
    assert nft_state(resolvers) == baseline, output[-3000:]
    entry = Ledger(ledger_path).get(entry_id)
    assert entry is not None and entry.state == "closed"
    assert "watchdog" not in str(entry.note), entry.note  # the run undid it itself
    assert _poll(lambda: not find_watchdogs(entry_id), 15) is not None


@pytest.mark.parametrize("first", ["watchdog", "rollback"])
def test_the_watchdog_and_gameday_rollback_never_both_undo(
    first: str, resolvers: Any, ledger_path: Path, tmp_path: Path
) -> None:
    baseline = nft_state(resolvers)
    # the first one holds the entry's claim for 10 s, inside its undo, while the other comes
    hold = "dns-rate-limit.mid-undo=sleep:10"
    env = cli_env(ledger_path)
    grace = 1.0 if first == "watchdog" else 8.0
    if first == "watchdog":
        env["GAMEDAY_WATCHDOG_FAILPOINTS"] = hold
    experiment = _experiment(_untimed_limit(resolvers), grace=grace)
    with _run(experiment, tmp_path, env) as proc:
        assert _poll(lambda: nft_state(resolvers) != baseline, 60) is not None
        proc.kill()
        proc.wait(timeout=10)
        # the watchdog's undo starts 1 s after the kill and holds 10 s; or the rollback
        # starts now and holds 10 s inside its undo, while the watchdog's 8 s grace ends
        time.sleep(2.0 if first == "watchdog" else 0.0)
        rollback_env = {**cli_env(ledger_path)}
        if first == "rollback":
            rollback_env["GAMEDAY_FAILPOINTS"] = hold
        rollback = subprocess.run(
            gameday_argv("rollback"),
            env=rollback_env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert rollback.returncode == 0, rollback.stderr
    assert nft_state(resolvers) == baseline
    (entry_id,) = _recorded_ids(ledger_path)
    closes = [e for e in _events(ledger_path) if e["event"] == "close" and e["id"] == entry_id]
    assert len(closes) == 1, closes  # one undo, claimed once
    note = str(closes[0]["data"]["note"])
    assert _poll(lambda: not find_watchdogs(entry_id), 20) is not None, "the watchdog lingers"
    entry = Ledger(ledger_path).get(entry_id)
    assert entry is not None and entry.watchdog is not None
    said = Path(entry.watchdog["log"]).read_text()  # what the watchdog said it did
    if first == "watchdog":
        assert note.startswith("watchdog pid"), note
        assert "already undone meanwhile" in rollback.stderr, rollback.stderr
        assert "✓ undo" not in rollback.stderr, rollback.stderr
        assert "undone: watchdog pid" in said, said
    else:
        assert "watchdog" not in note, note
        assert "✓ undo dns-rate-limit" in rollback.stderr, rollback.stderr
        assert "undone:" not in said, said  # it never claims the rollback's undo
        assert "closed" in said, said


def test_a_killed_runs_fault_is_undone_even_after_its_ledger_is_deleted(
    resolvers: Any, ledger_path: Path, tmp_path: Path
) -> None:
    """The watchdog keeps the entry it read: the ledger's loss does not keep the fault."""
    baseline = nft_state(resolvers)
    experiment = _experiment(_untimed_limit(resolvers), grace=GRACE_S)
    with _run(experiment, tmp_path, cli_env(ledger_path)) as proc:
        assert _poll(lambda: nft_state(resolvers) != baseline, 60) is not None, _said(proc)
        (entry_id,) = _recorded_ids(ledger_path)
        time.sleep(1.0)
        proc.kill()
        proc.wait(timeout=10)
        killed = time.monotonic()
        for part in ledger_path.parent.glob(ledger_path.name + "*"):
            part.unlink()  # database, event log, WAL, locks: all gone
        gone = _poll(lambda: nft_state(resolvers) == baseline, GRACE_S + 60)
    assert gone is not None, "the fault outlived its run and its ledger"
    assert gone - killed <= GRACE_S + SLACK_S
    assert not ledger_path.exists()  # the watchdog made no new, empty ledger
    assert _poll(lambda: not find_watchdogs(entry_id), 15) is not None, "the watchdog lingers"
    said = (ledger_path.parent / "helpers" / f"{entry_id}.watchdog.log").read_text()
    assert "undone:" in said and "could not record it" in said, said
