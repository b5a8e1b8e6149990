"""The crash matrix's netem row: a real ``gameday run`` killed in every window (VM lane only).

netem needs a kernel with sch_netem, so these cells run inside the qemu
micro-VM (``tests/network/test_network_vm_lane.py`` runs this file there).
Each cell is the host matrix's cell (``test_crash_matrix.py``) for netem: a
real ``gameday run`` of a latency experiment (``add_latency``, with
``remove_latency`` in its rollbacks) is SIGKILLed by a failpoint
(``GAMEDAY_FAILPOINTS``) in one window of the action or of its undo; its
exit by SIGKILL proves the window was reached. In the windows where the fault
is applied, iproute2's ``tc`` (not the product's netlink code) must show it
before anything undoes it, and the ledger entry must still be open: nothing
but the next command may undo it. Then ``gameday rollback`` runs as a
separate command, and the interface's qdiscs, classes and filters, read with
``tc``, must be what they were: a pre-existing ``tbf`` root, exactly. The
``raise`` cell fails the action mid-apply: the run must exit 2 and the tree
be back without any ``gameday rollback``.

netem's delay lasts until it is undone (no timer), so a no-op undo leaves it
in place for the final check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.harness import ROOT, cli_env, gameday_argv
from support.netlab import kernel_has_netem, sh, tc_show

from chaos_ext._core import ledger as fault_ledger
from chaos_ext._core.ledger import Ledger

pytestmark = [
    pytest.mark.vm,
    pytest.mark.skipif(not kernel_has_netem(), reason="kernel without sch_netem: VM lane only"),
]

# window -> (failpoint, exit of `gameday run`, how the target shows the fault after the kill)
WINDOWS = {
    "before-entry": ("netem.before-entry=kill", -9, None),
    "after-entry": ("netem.after-entry=kill", -9, None),
    "mid-apply": ("netem.mid-apply=kill", -9, "netem"),  # the netem qdisc, not yet filtered
    "after-apply": ("netem.after-apply=kill", -9, "netem"),
    "mid-undo": ("netem.mid-undo=kill", -9, "tbf gone"),  # the tree deleted, not yet replayed
    "mid-apply-raise": ("netem.mid-apply=raise", 2, None),
}
# A cell's `gameday run` took 17-53 s and a whole cell 36-89 s under emulation (TCG, host load
# 4 and 8-10); each command's cap is 4x the slowest, and a cell's pytest timeout covers two.
CLI_S = 240


@pytest.fixture(scope="module")
def node() -> Iterator[str]:
    """A namespace with a veth pair whose root qdisc is a tbf: what must come back."""
    ns = f"gdc-{uuid.uuid4().hex[:6]}"
    sh("ip", "netns", "add", ns)
    try:
        sh("ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "peer0")
        sh("ip", "-n", ns, "addr", "add", "10.78.0.1/24", "dev", "eth0")
        for dev in ("eth0", "peer0"):
            sh("ip", "-n", ns, "link", "set", dev, "up")
        tbf = ("tbf", "rate", "1gbit", "burst", "1mb", "latency", "100ms")
        sh("tc", "-n", ns, "qdisc", "add", "dev", "eth0", "root", "handle", "7:", *tbf)
        yield ns
    finally:
        sh("ip", "netns", "delete", ns, check=False)


def _experiment(node: str) -> dict[str, Any]:
    arguments = {
        "interface": "eth0",
        "delay_seconds": 0.08,
        "destinations": ["10.78.0.0/24"],
        "target": f"netns:{node}",
    }
    provider = {"type": "python", "module": "chaos_ext.network.actions"}
    return {
        "title": "netem, crashed on purpose",
        "description": "the crash matrix's netem row (issue 34)",
        "method": [
            {
                "type": "action",
                "name": "inject",
                "provider": {**provider, "func": "add_latency", "arguments": arguments},
            }
        ],
        "rollbacks": [
            {"type": "action", "name": "undo", "provider": {**provider, "func": "remove_latency"}}
        ],
    }


def _gameday(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        gameday_argv(*args),
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=CLI_S,
        check=False,
    )


def _live(shows: str, baseline: str, now: str, node: str) -> str | None:
    """Why the fault is not visible in ``now`` as ``shows`` says it must be (None: it is)."""
    qdiscs = sh("tc", "-n", node, "qdisc", "show", "dev", "eth0").stdout
    if shows == "netem" and "netem" not in qdiscs:
        return f"no netem qdisc: {qdiscs}"
    if shows == "tbf gone" and ("tbf" in qdiscs or now == baseline):
        return f"the saved tbf is still there: {qdiscs}"
    return None


@pytest.mark.slow
@pytest.mark.timeout(2 * CLI_S + 60)
@pytest.mark.parametrize("window", sorted(WINDOWS))
def test_a_killed_gameday_run_then_gameday_rollback_leaves_the_tree_as_it_was(
    window: str, node: str, ledger_path: Path, tmp_path: Path
) -> None:
    baseline = tc_show(node, "eth0")
    failpoint, expected, shows = WINDOWS[window]
    path = tmp_path / "experiment.json"
    path.write_text(json.dumps(_experiment(node)))
    # the dead-man watchdog (branch `watchdog`, not on main yet) off: `gameday rollback` is what
    # this cell proves; netem has no deadline, so with grace 0 nothing else may undo it
    env = {**cli_env(ledger_path), "GAMEDAY_FAILPOINTS": failpoint, "GAMEDAY_WATCHDOG_GRACE": "0"}
    started = time.monotonic()
    run = _gameday(env, tmp_path, "run", "--journal", "j.json", str(path))
    ran_s = time.monotonic() - started
    assert run.returncode == expected, f"failpoint not reached? {run.stderr[-3000:]}"
    after_kill = tc_show(node, "eth0")
    if shows is not None:  # live, as `tc` shows it, and nothing has undone it yet
        assert (why := _live(shows, baseline, after_kill, node)) is None, why
        assert [e.kind for e in Ledger(ledger_path).open_entries()] == ["netem"]

    env.pop("GAMEDAY_FAILPOINTS")
    if expected == 2:  # the failed action undid its fault at once: no rollback needed
        assert after_kill == baseline
        assert Ledger(ledger_path).open_entries() == []
    else:
        rollback = _gameday(env, tmp_path, "rollback")
        assert rollback.returncode == 0, rollback.stdout[-2000:] + rollback.stderr[-2000:]
    assert tc_show(node, "eth0") == baseline
    assert "netem" not in sh("tc", "-n", node, "qdisc", "show", "dev", "eth0").stdout
    verdict = fault_ledger.verify(ledger_path, full=True)  # the ledger agrees with itself
    assert verdict.ok, verdict.problems
    assert Ledger(ledger_path).open_entries() == []
    took = time.monotonic() - started
    print(f"netem {window}: run {ran_s:.1f} s, total {took:.1f} s")  # noqa: T201 - the cell's cost


TIMED_CHILD = """
import json, sys, time
from chaos_ext.network import actions
print(json.dumps(actions.add_latency(**json.loads(sys.argv[1]))), flush=True)
time.sleep(600)
"""
# Python starts slowly under emulation (tens of seconds): the watchdog must be up and have
# imported the undo before the deadline, so the duration is long here
NETEM_DURATION_S = 45.0


def test_a_sigkill_during_a_timed_delay_ends_it_at_its_deadline(
    node: str, ledger_path: Path
) -> None:
    """Issue 27 item 2: no gameday command after the kill; the tree comes back by itself."""
    baseline = tc_show(node, "eth0")
    args = {
        "interface": "eth0",
        "delay_seconds": 0.08,
        "destinations": ["10.78.0.0/24"],
        "target": f"netns:{node}",
        "duration_seconds": NETEM_DURATION_S,
    }
    env = {**os.environ, "GAMEDAY_LEDGER": str(ledger_path), "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", TIMED_CHILD, json.dumps(args)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        result = json.loads(child.stdout.readline())  # applied, its deadline recorded
        seen = time.monotonic()
        assert tc_show(node, "eth0") != baseline  # the delay is in place
        log = ledger_path.parent / "helpers" / f"{result['ledger_id']}.watchdog.log"
        deadline = seen + NETEM_DURATION_S - 5
        while "watching" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, "the watchdog did not start"
            time.sleep(0.5)
        child.kill()
        child.wait(timeout=30)
        gone = None
        while time.monotonic() < seen + NETEM_DURATION_S + 120:
            at = time.monotonic()
            if tc_show(node, "eth0") == baseline:
                gone = at
                break
            time.sleep(0.2)
    finally:
        child.kill()
        child.wait(timeout=30)
    assert gone is not None, "the delay outlived its killed runner"
    # the emulated guest's watchdog woke 12 s late at host load 8 (57.1 s for a 45 s delay):
    # 20 s of slack, still far short of the 600 s the killed child would have held it
    assert gone - seen <= NETEM_DURATION_S + 20, f"ended {gone - seen:.1f} s after it was applied"
    entry = Ledger(ledger_path).get(result["ledger_id"])
    assert entry is not None and entry.state == "closed", entry
    assert "watchdog pid" in str(entry.note), entry.note
