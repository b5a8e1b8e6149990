"""``_procfs``, the one reader of ``/proc``, against real processes of this kernel."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos_ext._core import procfs as _procfs

# A child that names itself with parentheses and spaces, forks one grandchild, then waits.
_TREE = """
import os, sys, time
with open("/proc/self/comm", "w") as f:
    f.write("a) b (c")
if os.fork() == 0:
    time.sleep(60)
    os._exit(0)
sys.stdout.write("ready\\n"); sys.stdout.flush()
time.sleep(60)
"""


@pytest.fixture
def tree() -> Iterator[tuple[subprocess.Popen[str], str]]:
    marker = f"GDT_PROCFS={uuid.uuid4().hex}"
    name, value = marker.split("=")
    proc = subprocess.Popen(
        [sys.executable, "-c", _TREE],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, name: value},
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    yield proc, marker
    for child in _procfs.children(proc.pid):
        os.kill(child, 9)
    proc.kill()
    proc.wait(timeout=10)


def test_stat_survives_a_command_name_with_parentheses(
    tree: tuple[subprocess.Popen[str], str],
) -> None:
    proc, _ = tree
    found = _procfs.process(proc.pid)
    assert found is not None
    assert found.comm == "a) b (c"
    assert found.ppid == os.getpid()
    assert found.state in "RS"


def test_start_time_is_in_clock_ticks_since_boot(tree: tuple[subprocess.Popen[str], str]) -> None:
    proc, _ = tree
    ticks = os.sysconf("SC_CLK_TCK")
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    started = _procfs.start_time(proc.pid)
    assert started is not None
    assert 0 <= uptime - started / ticks < 120  # started during this test
    own = _procfs.start_time(os.getpid())
    assert own is not None and own <= started


def test_children_tree_and_environ(tree: tuple[subprocess.Popen[str], str]) -> None:
    proc, marker = tree
    kids = _procfs.children(proc.pid)
    assert len(kids) == 1
    assert _procfs.tree_size(proc.pid) == 2
    # the grandchild inherited the environment: both carry the marker
    assert sorted(_procfs.pids_with_environ(marker)) == sorted([proc.pid, *kids])
    assert _procfs.pids_with_environ(marker + "x") == []


def test_a_zombie_exists_but_is_not_alive() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while (found := _procfs.stat(proc.pid)) is not None and not found.zombie:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        assert _procfs.exists(proc.pid)
        assert not _procfs.alive(proc.pid)
        assert _procfs.process(proc.pid) is None
        assert _procfs.tree_size(proc.pid) == 1
    finally:
        proc.wait(timeout=10)
    assert not _procfs.exists(proc.pid)
    assert _procfs.stat(proc.pid) is None and _procfs.start_time(proc.pid) is None
    assert _procfs.tree_size(proc.pid) == 0


def test_capabilities_from_our_status_and_from_text() -> None:
    status = Path("/proc/self/status").read_text()
    cap_eff = next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff"))
    assert _procfs.effective_capabilities(status) == int(cap_eff, 16)
    assert _procfs.has_capability(_procfs.CAP_NET_ADMIN) == bool(
        int(cap_eff, 16) & (1 << _procfs.CAP_NET_ADMIN)
    )
    # proc(5)'s field layout as an unprivileged process on a remote node shows it
    remote = "Name:\tcat\nCapInh:\t0000000000000000\nCapEff:\t0000000000000000\n"
    assert not _procfs.has_capability(_procfs.CAP_NET_ADMIN, remote)
    root = remote.replace("CapEff:\t0000000000000000", "CapEff:\t000001ffffffffff")
    assert _procfs.has_capability(_procfs.CAP_NET_ADMIN, root)
    assert _procfs.effective_capabilities("Name:\tx\n") == 0


def test_boot_id_is_this_boots_uuid() -> None:
    found = _procfs.boot_id()
    assert str(uuid.UUID(found)) == found
    assert _procfs.boot_id() == found  # the same boot
