"""The crash matrix's netem row: a real latency tree, killed in every window (VM lane only).

netem needs a kernel with sch_netem, so these cells run inside the qemu
micro-VM (``tests/network/test_network_vm_lane.py`` runs this file there).
Each cell starts one process that calls ``add_latency`` (and, for the
mid-undo window, ``remove_latency``) with a failpoint set; it must die by
SIGKILL at that point (or fail there, for ``raise``). Then the ledger's
sweep runs as ``gameday rollback`` runs it (in this process: a Python start
costs tens of seconds under emulation), and the interface's qdiscs,
classes and filters, read with iproute2's ``tc``, must be what they were:
a pre-existing ``tbf`` root, exactly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from support.harness import ROOT
from support.netlab import kernel_has_netem, sh, tc_show

from chaos_ext._core import ledger as fault_ledger
from chaos_ext._core.ledger import Ledger
from chaos_ext._runner.sweep import sweep

pytestmark = [
    pytest.mark.vm,
    pytest.mark.skipif(not kernel_has_netem(), reason="kernel without sch_netem: VM lane only"),
]

CHILD = """
import json, sys
from chaos_ext.network import actions
args = json.loads(sys.argv[1])
actions.add_latency(**args)
if sys.argv[2] == "undo":
    actions.remove_latency(args["interface"], target=args["target"])
"""

WINDOWS = {
    "before-entry": "netem.before-entry=kill",
    "after-entry": "netem.after-entry=kill",
    "mid-apply": "netem.mid-apply=kill",
    "after-apply": "netem.after-apply=kill",
    "mid-undo": "netem.mid-undo=kill",
    "mid-apply-raise": "netem.mid-apply=raise",
}


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
        sh(
            "tc",
            "-n",
            ns,
            "qdisc",
            "add",
            "dev",
            "eth0",
            "root",
            "handle",
            "7:",
            "tbf",
            "rate",
            "1gbit",
            "burst",
            "1mb",
            "latency",
            "100ms",
        )
        yield ns
    finally:
        sh("ip", "netns", "delete", ns, check=False)


@pytest.mark.parametrize("window", sorted(WINDOWS))
def test_a_crash_in_any_window_leaves_the_tree_as_it_was(
    window: str, node: str, ledger_path: Path
) -> None:
    baseline = tc_show(node, "eth0")
    args = {
        "interface": "eth0",
        "delay_seconds": 0.08,
        "destinations": ["10.78.0.0/24"],
        "target": f"netns:{node}",
    }
    env = {
        **os.environ,
        "GAMEDAY_LEDGER": str(ledger_path),
        "PYTHONPATH": str(ROOT),
        "GAMEDAY_FAILPOINTS": WINDOWS[window],
    }
    mode = "undo" if window == "mid-undo" else "keep"
    child = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(args), mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    expected = 1 if window.endswith("raise") else -9
    assert child.returncode == expected, f"failpoint not reached? {child.stderr[-2000:]}"
    if window.endswith("raise"):
        assert tc_show(node, "eth0") == baseline  # the failed action undid itself at once
    book = Ledger(ledger_path)
    outcomes = sweep(book.open_entries(), book, Console(stderr=True))  # `gameday rollback`
    assert all(o.ok for o in outcomes), [o.note for o in outcomes]
    assert tc_show(node, "eth0") == baseline
    assert fault_ledger.verify(ledger_path, full=True).ok
    assert book.open_entries() == []
