"""Ownership by identity (issue 27, item 1) and one undo per entry (item 5): the pure parts,
and two rollbacks racing over one entry, in two threads and in two ``gameday rollback``
processes.

The sweeps themselves run against real namespaces, nftables and qdiscs in
tests/dns/test_dns_rate_limit_identity.py and tests/network/test_network_identity.py.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from support import slow_undo
from support.harness import cli_env, gameday_argv, wait_for

from chaos_ext._core import procfs as _procfs
from chaos_ext._core.contract import undo_entries
from chaos_ext._core.ledger import Census, Entry, Ledger, UndoOutcome, undo
from chaos_ext._core.targets import identity
from chaos_ext._core.targets.spec import Target, parse_target
from chaos_ext.dns._sweep import plan_sweep
from chaos_ext.errors import InvalidArgument, TargetGone
from chaos_ext.network._sweep import Place, owner_note

HERE = identity.namespace_key(Target("local"))
MEANWHILE = "already undone meanwhile by another rollback or timer"


def _entry(recipe: dict[str, Any], *, kind: str = "netem", owner: int = 0, **more: Any) -> Entry:
    return Entry(
        id=f"{abs(hash(repr(recipe))):016x}"[:16],
        kind=kind,
        target=str(recipe.get("target")),
        module="m",
        recipe=recipe,
        run_id="r",
        owner_pid=owner or os.getpid(),
        owner_start=None,
        created_at=0.0,
        **more,
    )


def test_local_and_this_process_s_pid_are_one_namespace() -> None:
    assert HERE is not None and HERE.startswith(f"{_procfs.boot_id()}:")
    assert identity.namespace_key(parse_target(f"pid:{os.getpid()}")) == HERE
    assert identity.namespace_key(parse_target("netns:gdt-no-such-namespace")) is None


def test_a_namespace_path_is_not_a_target_spelling() -> None:
    """``/run/netns/NAME`` is not accepted: the spellings are netns:, pid: (and a second name)."""
    for text in ("/run/netns/app", "netns:/run/netns/app", "path:/run/netns/app"):
        with pytest.raises(InvalidArgument):
            parse_target(text)


def test_entries_on_a_target_are_found_by_namespace_not_by_text() -> None:
    by_key = _entry({"target": "netns:somewhere", identity.NETNS_KEY: HERE})
    by_pid_now = _entry({"target": f"pid:{os.getpid()}"})  # recorded before keys were
    elsewhere = _entry({"target": "local", identity.NETNS_KEY: "other-boot:4:1"})
    unknown = _entry({"target": "netns:gdt-no-such-namespace"})
    remote = _entry({"target": "ssh:node-1"})
    found = identity.entries_on([by_key, by_pid_now, elsewhere, unknown, remote], Target("local"))
    assert found == [by_key, by_pid_now]
    gone = parse_target("netns:gdt-no-such-namespace")  # no namespace to compare: the text
    assert identity.entries_on([by_key, unknown], gone) == [unknown]
    assert identity.entries_on([remote, by_key], parse_target("ssh:node-1")) == [remote]


def test_reach_keeps_a_spelling_that_still_reaches_the_namespace_and_refuses_a_gone_one() -> None:
    pid = parse_target(f"pid:{os.getpid()}")
    assert identity.reach(pid, HERE) == pid and identity.reach(pid, None) == pid
    with pytest.raises(TargetGone, match="no longer exists"):
        identity.reach(pid, f"{HERE}0")  # no namespace has that inode


def test_a_rate_limit_sweep_deletes_only_tables_no_ledger_names() -> None:
    owned = _entry(
        {"target": "pid:7", "table": "gameday_dnsrate_aaaaaaaaaaaa"}, kind="dns-rate-limit"
    )
    census = Census([(Path("/l/a.sqlite3"), owned)])
    plan = plan_sweep(
        "netns:x", ["gameday_dnsrate_aaaaaaaaaaaa", "gameday_dnsrate_bbbbbbbbbbbb"], census
    )
    assert plan.delete == ["gameday_dnsrate_bbbbbbbbbbbb"]
    (note,) = plan.notes
    assert note.startswith(
        f"netns:x: table gameday_dnsrate_aaaaaaaaaaaa left alone: open entry"
        f" {owned.id} (pid:7, run r, its runner is alive) in the ledger at"
        " /l/a.sqlite3"
    )
    unreadable = plan_sweep(
        "netns:x", ["gameday_dnsrate_bbbbbbbbbbbb"], Census([], ["/l/b.sqlite3: damaged"])
    )
    assert unreadable.delete == [] and "cannot be read" in unreadable.notes[0]
    assert plan_sweep("netns:x", [], Census([], ["/l/b: damaged"])).notes == []


def test_a_latency_tree_is_kept_when_any_entry_may_own_it() -> None:
    here = Place("eth0", netns_key=HERE)
    assert here.refers(_entry({"target": "netns:a", "interface": "eth0", identity.NETNS_KEY: HERE}))
    assert not here.refers(
        _entry({"target": "netns:a", "interface": "eth1", identity.NETNS_KEY: HERE})
    )
    assert not here.refers(
        _entry({"target": "local", "interface": "eth0", identity.NETNS_KEY: "other:1:2"})
    )
    unknowable = _entry({"target": "netns:gdt-no-such-namespace", "interface": "eth0"})
    assert here.refers(unknowable)  # cannot be told apart: kept
    node = {"scope": "ssh", "ssh": {"host_key": "ssh-ed25519 SHA256:abc"}}
    on_node = _entry({"target": "ssh:n1", "interface": "eth0"}, identity=node)
    assert not here.refers(on_node)
    assert Place("eth0", host_key="ssh-ed25519 SHA256:abc").refers(on_node)
    assert not Place("eth0", host_key="ssh-ed25519 SHA256:xyz").refers(on_node)
    census = Census([(Path("/l/a"), unknowable)])
    assert "latency tree left alone: open entry" in str(owner_note("netns:a/eth0", census, here))
    assert owner_note("netns:a/eth0", Census(), here) is None


def _slow_entry(ledger_path: Path, tmp_path: Path, seconds: float = 0.5) -> Entry:
    recipe = {"runs": str(tmp_path / "runs.txt"), "seconds": seconds}
    return Ledger(ledger_path).record(
        kind=slow_undo.KIND, target="t", recipe=recipe, module=slow_undo.__name__
    )


def _runs(tmp_path: Path) -> list[str]:
    path = tmp_path / "runs.txt"
    return path.read_text().split() if path.exists() else []


def test_two_threads_undoing_one_entry_run_its_undo_once(ledger_path: Path, tmp_path: Path) -> None:
    entry = _slow_entry(ledger_path, tmp_path)
    outcomes: list[UndoOutcome] = []
    threads = [threading.Thread(target=lambda: outcomes.append(undo(entry))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert _runs(tmp_path) == [entry.id]
    first, second = sorted(outcomes, key=lambda o: not o.undone_here)
    assert first.ok and first.undone_here and first.note == "slow undo of t done"
    assert second.ok and not second.undone_here
    assert second.note == f"{MEANWHILE} (slow undo of t done)"


def test_two_rollback_activities_do_not_both_count_the_undo(
    ledger_path: Path, tmp_path: Path
) -> None:
    entry = _slow_entry(ledger_path, tmp_path)
    results: list[dict[str, Any]] = []
    threads = [
        threading.Thread(target=lambda: results.append(undo_entries([entry]))) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(r["undone"] for r in results) == [0, 1]
    (other,) = [r for r in results if r["undone"] == 0]
    assert other["faults"] == [] and other["left_alone"][0]["ledger_id"] == entry.id
    assert MEANWHILE in other["left_alone"][0]["reason"]


def test_two_gameday_rollbacks_at_once_undo_an_entry_once(
    ledger_path: Path, tmp_path: Path
) -> None:
    entry = _slow_entry(ledger_path, tmp_path, seconds=2.0)
    env = cli_env(ledger_path)
    first = subprocess.Popen(
        gameday_argv("rollback"),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wait_for(lambda: _runs(tmp_path) == [entry.id], 30, "the first rollback's undo to start")
    second = subprocess.run(
        gameday_argv("rollback"), env=env, capture_output=True, text=True, timeout=60, check=False
    )
    out_first, _ = first.communicate(timeout=60)
    assert first.returncode == 0 and second.returncode == 0, out_first + second.stdout
    assert _runs(tmp_path) == [entry.id]  # the undo ran once
    assert "✓ undo unit-slow-undo on t: slow undo of t done" in out_first
    said = second.stdout + second.stderr
    assert f"· undo unit-slow-undo on t: {MEANWHILE}" in said
    assert Ledger(ledger_path).open_entries() == []
