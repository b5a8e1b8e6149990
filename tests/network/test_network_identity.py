"""remove_latency's sweep decides by namespace identity, never by spelling (issue 27, item 1).

This kernel has no sch_netem, so run A's latency fault is planted as
add_latency leaves it: a live process records the netem entry (recipe and
namespace key as add_latency records them) and the latency tree's root
(htb, handle ``1d1a:``, the handle that marks a tree as ours) is put on a
veth in a namespace the test creates. Run B, this process, rolls back with
another spelling of the same namespace, with A's ledger or its own: the
tree must stay while A lives, and after A died until someone takes dead
runs' faults. The qdisc is read with iproute2's ``tc``, not the code under
test. (The real netem tree is tested in the VM lane, tests/network/*vm*.)
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.harness import cli_env
from support.netlab import sh, tc_show
from support.netns_spellings import SPELLINGS, Spelled, spelled_namespace

from chaos_ext._core.ledger import Ledger
from chaos_ext._core.targets.identity import NETNS_KEY, namespace_key
from chaos_ext._core.targets.spec import parse_target
from chaos_ext.network import _local, actions

pytestmark = [pytest.mark.timeout(120), pytest.mark.orphans]

_RUN_A = """
import json, sys, time
from chaos_ext._core.ledger import Ledger
entry = Ledger().record(kind="netem", target=sys.argv[1], recipe=json.loads(sys.argv[2]),
                        module="chaos_ext.network.actions")
print(entry.id, flush=True)
time.sleep(120)
"""


@pytest.fixture
def ns() -> Iterator[Spelled]:
    with spelled_namespace() as made:
        sh("ip", "-n", made.name, "link", "add", "va", "type", "veth", "peer", "name", "vb")
        yield made


def _start_a(ns: Spelled, spelled: str, ledger: Path) -> tuple[subprocess.Popen[str], str]:
    """Run A's latency on ``va`` as add_latency records and installs it: (process, entry id)."""
    target = ns.spell(spelled)
    where = parse_target(target)
    recipe = {
        "target": target,
        "interface": "va",
        "spec": {},
        "connection": {},
        "snapshot": _local.snapshot(where, "va"),
        NETNS_KEY: namespace_key(where),
    }
    run_a = subprocess.Popen(
        [sys.executable, "-c", _RUN_A, where.label("va"), json.dumps(recipe)],
        stdout=subprocess.PIPE,
        text=True,
        env=cli_env(ledger),
    )
    assert run_a.stdout is not None
    entry_id = run_a.stdout.readline().strip()
    sh("tc", "-n", ns.name, "qdisc", "add", "dev", "va", "root", "handle", "1d1a:", "htb")
    return run_a, entry_id


def _has_tree(ns: Spelled) -> bool:
    return "qdisc htb 1d1a: root" in tc_show(ns.name, "va")


PAIRS = [(a, b) for a, b in itertools.product(SPELLINGS, SPELLINGS) if a != b]


@pytest.mark.parametrize("ledgers", ["one ledger", "two ledgers"])
@pytest.mark.parametrize(("spelled_a", "spelled_b"), PAIRS)
def test_a_sweep_spelled_otherwise_never_takes_a_live_runs_latency_tree(
    ns: Spelled,
    spelled_a: str,
    spelled_b: str,
    ledgers: str,
    ledger_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger_b = ledger_path if ledgers == "one ledger" else tmp_path / "b" / "ledger.sqlite3"
    run_a, entry_id = _start_a(ns, spelled_a, ledger_path)
    target_b = ns.spell(spelled_b)
    monkeypatch.setenv("GAMEDAY_LEDGER", str(ledger_b))
    try:
        for dead_too in (False, True):
            out = actions.remove_latency("va", target=target_b, include_dead_runs=dead_too)
            assert out["undone"] == 0, out
            assert _has_tree(ns)  # A's tree is untouched
            kept = out["unrecorded"]
            assert f"latency tree left alone: open entry {entry_id}" in kept, out
            assert "its runner is alive" in kept and str(ledger_path) in kept
            alone = [a["ledger_id"] for a in out["left_alone"]]
            assert alone == ([entry_id] if ledger_b == ledger_path else []), out
    finally:
        run_a.kill()
        run_a.wait(timeout=10)
    kept = actions.remove_latency("va", target=target_b)["unrecorded"]
    assert _has_tree(ns) and "its runner is dead" in kept, kept
    monkeypatch.setenv("GAMEDAY_LEDGER", str(ledger_path))  # A's ledger (the same in one)
    out = actions.remove_latency("va", target=target_b, include_dead_runs=True)
    assert out["undone"] == 1, out  # found by namespace, however A spelled it
    assert out["unrecorded"].endswith("va: no latency tree"), out
    assert not _has_tree(ns)
    assert Ledger(ledger_path).open_entries() == []


def test_a_tree_nobody_owns_is_swept_by_any_spelling(ns: Spelled, ledger_path: Path) -> None:
    """The sweep still does its job: the ledger that knew the tree is lost."""
    for spelled in SPELLINGS:
        sh("tc", "-n", ns.name, "qdisc", "add", "dev", "va", "root", "handle", "1d1a:", "htb")
        out = actions.remove_latency("va", target=ns.spell(spelled))
        assert "latency tree without a ledger entry deleted" in out["unrecorded"], out
        assert not _has_tree(ns)


def test_the_undo_finds_the_namespace_when_the_pid_it_was_spelled_by_is_gone(
    ns: Spelled, ledger_path: Path
) -> None:
    run_a, _ = _start_a(ns, "pid", ledger_path)
    run_a.kill()
    run_a.wait(timeout=10)
    subprocess.run(["kill", "-9", str(ns.pid)], check=True, timeout=10)
    out = actions.remove_latency("va", target=ns.spell("name"), include_dead_runs=True)
    assert out["undone"] == 1, out
    note = out["faults"][0]["note"]  # restored where it is, not "target gone"
    assert note.startswith(f"netns:{ns.name}/va: previous qdisc tree restored"), out
    assert not _has_tree(ns)


def test_a_sweep_of_a_gone_target_says_so_and_does_not_fail(ledger_path: Path) -> None:
    out = actions.remove_latency("va", target="netns:gdt-no-such-namespace")
    assert out["undone"] == 0 and "the target is gone" in out["unrecorded"], out
