"""On this machine's kernel (no netem): the preflight refuses clearly and changes nothing;
snapshot/restore of an existing tree is exact; RTT probe inside a namespace."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.netlab import VethNs, kernel_has_netem, sh, tc_show

from chaos_ext._core.ledger import Ledger, undo
from chaos_ext._core.targets.spec import parse_target
from chaos_ext.errors import PreflightFailed
from chaos_ext.network import _local, _tree, actions, probes

HAS_NETEM = kernel_has_netem()


def _shaped(v: VethNs) -> None:
    """A non-default tree: htb root, a class with a tbf leaf, a u32 filter."""
    tc = ["tc", "-n", v.ns]
    sh(*tc, "qdisc", "add", "dev", v.dev, "root", "handle", "5:", "htb", "default", "20")
    sh(
        *tc,
        "class",
        "add",
        "dev",
        v.dev,
        "parent",
        "5:",
        "classid",
        "5:20",
        "htb",
        "rate",
        "10mbit",
    )
    sh(
        *tc,
        "qdisc",
        "add",
        "dev",
        v.dev,
        "parent",
        "5:20",
        "handle",
        "6:",
        "tbf",
        "rate",
        "1mbit",
        "burst",
        "32k",
        "latency",
        "50ms",
    )
    sh(
        *tc,
        "filter",
        "add",
        "dev",
        v.dev,
        "parent",
        "5:",
        "protocol",
        "ip",
        "prio",
        "1",
        "u32",
        "match",
        "ip",
        "dst",
        "10.2.0.0/24",
        "flowid",
        "5:20",
    )


@pytest.mark.skipif(HAS_NETEM, reason="this kernel has netem: the VM lane tests the real fault")
def test_preflight_names_the_missing_netem_and_changes_nothing(
    veth_ns: VethNs, ledger_path: Path
) -> None:
    _shaped(veth_ns)
    before = tc_show(veth_ns.ns, veth_ns.dev)
    with pytest.raises(PreflightFailed, match=r"kernel \S+ on netns:gdn-\w+ has no sch_netem"):
        actions.add_latency("va", 0.15, ["10.2.0.0/24"], target=f"netns:{veth_ns.ns}", ports=[5432])
    assert tc_show(veth_ns.ns, veth_ns.dev) == before
    assert Ledger(ledger_path).history() == []  # refused before anything was recorded


def test_snapshot_and_restore_are_exact_for_a_configured_tree(veth_ns: VethNs) -> None:
    _shaped(veth_ns)
    target = parse_target(f"netns:{veth_ns.ns}")
    before_cli = tc_show(veth_ns.ns, veth_ns.dev)
    snap = json.loads(json.dumps(_local.snapshot(target, "va")))  # as stored in the ledger
    assert snap["root_kind"] == "htb" and not snap["default_root"]
    # something else takes the root: the saved tree is gone
    sh("tc", "-n", veth_ns.ns, "qdisc", "replace", "dev", "va", "root", "handle", "1d1a:", "htb")
    assert "tbf" not in tc_show(veth_ns.ns, veth_ns.dev)
    note = _local.restore(target, "va", snap)
    assert "restored (htb)" in note
    assert tc_show(veth_ns.ns, veth_ns.dev) == before_cli
    assert _local.restore(target, "va", snap).endswith("already as before")  # idempotent


def test_restore_to_the_kernel_default_root(veth_ns: VethNs) -> None:
    target = parse_target(f"netns:{veth_ns.ns}")
    before_cli = tc_show(veth_ns.ns, veth_ns.dev)
    snap = _local.snapshot(target, "va")
    assert snap["default_root"]
    sh("tc", "-n", veth_ns.ns, "qdisc", "replace", "dev", "va", "root", "handle", "1d1a:", "htb")
    assert "restored (kernel default)" in _local.restore(target, "va", snap)
    assert tc_show(veth_ns.ns, veth_ns.dev) == before_cli


def test_restore_leaves_a_root_someone_else_changed(veth_ns: VethNs) -> None:
    target = parse_target(f"netns:{veth_ns.ns}")
    snap = _local.snapshot(target, "va")
    sh("tc", "-n", veth_ns.ns, "qdisc", "replace", "dev", "va", "root", "handle", "7:", "htb")
    assert "left alone" in _local.restore(target, "va", snap)
    assert "htb 7:" in tc_show(veth_ns.ns, veth_ns.dev)


def test_fingerprint_ignores_counters_but_not_options(veth_ns: VethNs) -> None:
    _shaped(veth_ns)
    target = parse_target(f"netns:{veth_ns.ns}")
    first = _local.snapshot(target, "va")
    sh(
        "tc",
        "-n",
        veth_ns.ns,
        "class",
        "change",
        "dev",
        "va",
        "parent",
        "5:",
        "classid",
        "5:20",
        "htb",
        "rate",
        "20mbit",
    )
    assert _tree.fingerprint(first) != _tree.fingerprint(_local.snapshot(target, "va"))


def test_qdisc_state_probe(veth_ns: VethNs) -> None:
    _shaped(veth_ns)
    state = probes.qdisc_state("va", target=f"netns:{veth_ns.ns}")
    assert state["latency_active"] is False and state["root_kind"] == "htb"


@pytest.fixture
def listener_in(veth_ns: VethNs) -> Iterator[tuple[str, int]]:
    """A TCP listener on the namespace's loopback, accepting in a thread."""
    sh("ip", "-n", veth_ns.ns, "link", "set", "lo", "up")
    sock = probes._socket_in(veth_ns.ns, socket.AF_INET)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield veth_ns.ns, sock.getsockname()[1]
    stop.set()
    thread.join(2)
    sock.close()


def test_measure_rtt_inside_a_namespace(listener_in: tuple[str, int]) -> None:
    ns, port = listener_in
    result = probes.measure_rtt("127.0.0.1", port, samples=10, netns=ns)
    assert result["samples"] == 10 and result["failed"] == 0
    assert 0 < result["min_ms"] <= result["median_ms"] <= result["p95_ms"] <= result["max_ms"]


def test_gameday_validate_refuses_bad_network_arguments(
    gameday: Callable[..., subprocess.CompletedProcess[str]],
    write_experiment: Callable[..., Path],
) -> None:
    activity = {
        "type": "action",
        "name": "latency",
        "provider": {
            "type": "python",
            "module": "chaos_ext.network.actions",
            "func": "add_latency",
            "arguments": {
                "interface": "eth0",
                "delay_seconds": 0.15,
                "destinations": ["10.2.0.0/33"],
                "target": "netns:app",
            },
        },
    }
    path = write_experiment({"title": "t", "description": "d", "method": [activity]})
    result = gameday("validate", str(path))
    assert result.returncode == 3
    assert "10.2.0.0/33" in result.stdout + result.stderr


def test_namespaces_are_entered_without_forking_the_runner(
    veth_ns: VethNs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork of a Chaos Toolkit runner inherits its SIGTERM handler and its experiment."""

    def no_fork() -> int:
        raise AssertionError("chaos_ext forked the process")

    monkeypatch.setattr("os.fork", no_fork)
    target = parse_target(f"netns:{veth_ns.ns}")
    assert _local.snapshot(target, "va")["default_root"]
    assert isinstance(_local.missing_features(), list)
    assert probes.qdisc_state("va", target=f"netns:{veth_ns.ns}")["latency_active"] is False


@pytest.mark.rolls_back("netem")
def test_remove_latency_without_a_ledger_entry(veth_ns: VethNs, ledger_path: Path) -> None:
    target = f"netns:{veth_ns.ns}"
    out = actions.remove_latency("va", target=target)
    assert out["undone"] == 0 and out["unrecorded"] == f"{target}/va: no latency tree"
    # a latency tree whose ledger was lost: only its handle tells it apart
    sh("tc", "-n", veth_ns.ns, "qdisc", "add", "dev", "va", "root", "handle", "1d1a:", "htb")
    out = actions.remove_latency("va", target=target)
    assert out["undone"] == 0 and "without a ledger entry deleted" in out["unrecorded"]
    assert "htb" not in tc_show(veth_ns.ns, "va")
    # without a target and interface nothing unrecorded is touched: the rollback is safe bare
    sh("tc", "-n", veth_ns.ns, "qdisc", "add", "dev", "va", "root", "handle", "1d1a:", "htb")
    assert actions.remove_latency() == {"undone": 0, "faults": [], "left_alone": []}
    assert "htb" in tc_show(veth_ns.ns, "va")


_OTHER_RUN = """
import json, sys, time
from chaos_ext._core.ledger import Ledger, undo
recipe = json.loads(sys.argv[2])
Ledger().record(kind="netem", target=sys.argv[1], recipe=recipe,
                module="chaos_ext.network.actions")
print("recorded", flush=True)
time.sleep(120)
"""


@pytest.mark.rolls_back("netem")
def test_remove_latency_leaves_a_live_runs_delay_alone(veth_ns: VethNs, ledger_path: Path) -> None:
    """Issue 22, point 5: another live run's fault on the same interface is not ours to undo."""
    target = f"netns:{veth_ns.ns}"
    snapshot = _local.snapshot(parse_target(target), "va")
    sh("tc", "-n", veth_ns.ns, "qdisc", "add", "dev", "va", "root", "handle", "1d1a:", "htb")
    recipe = {
        "target": target,
        "interface": "va",
        "spec": {},
        "snapshot": snapshot,
        "connection": {},
    }
    other = subprocess.Popen(
        [sys.executable, "-c", _OTHER_RUN, f"{target}/va", json.dumps(recipe)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout is not None and other.stdout.readline() == "recorded\n"
        out = actions.remove_latency("va", target=target)
        assert out["undone"] == 0 and "latency tree left alone" in out["unrecorded"], out
        assert "its runner is alive" in out["unrecorded"]
        (alone,) = out["left_alone"]
        assert alone["reason"] == "its runner is alive: that run undoes it itself"
        assert "htb" in tc_show(veth_ns.ns, "va")  # the live run's tree is untouched
        out = actions.remove_latency("va", target=target, include_dead_runs=True)
        assert out["undone"] == 0  # alive: still not ours
    finally:
        other.kill()
        other.wait(timeout=10)
    out = actions.remove_latency("va", target=target, include_dead_runs=True)
    assert out["undone"] == 1 and out["faults"][0]["kind"] == "netem", out
    assert "htb" not in tc_show(veth_ns.ns, "va")
    assert Ledger(ledger_path).open_entries() == []


def test_a_restore_cut_short_after_deleting_the_tree_still_brings_the_saved_one_back(
    veth_ns: VethNs,
) -> None:
    """Found by the crash matrix (netem, mid-undo): the undo had deleted the latency tree,
    was killed before re-creating the saved one, and the next undo left the kernel's
    default root in place, losing the configured tree from before the fault."""
    target = parse_target(f"netns:{veth_ns.ns}")
    _shaped(veth_ns)
    saved = _local.snapshot(target, "va")
    before = tc_show(veth_ns.ns, "va")
    sh("tc", "-n", veth_ns.ns, "qdisc", "del", "dev", "va", "root")  # where the kill landed
    assert _local.snapshot(target, "va")["default_root"]
    note = _local.restore(target, "va", saved)
    assert "after a restore cut short" in note
    assert tc_show(veth_ns.ns, "va") == before
    # someone else's new root is still left alone
    sh("tc", "-n", veth_ns.ns, "qdisc", "replace", "dev", "va", "root", "handle", "9:", "pfifo")
    assert "left alone" in _local.restore(target, "va", saved)


@pytest.mark.undoes("netem")
def test_the_ledger_undo_alone_brings_the_saved_tree_back(
    veth_ns: VethNs, ledger_path: Path
) -> None:
    """The netem undo handler by itself, with no sweep behind it (issue 34's mutation check):
    a fault's latency tree in place of a configured one, undone from its ledger entry."""
    target = f"netns:{veth_ns.ns}"
    _shaped(veth_ns)
    before = tc_show(veth_ns.ns, "va")
    snapshot = _local.snapshot(parse_target(target), "va")
    book = Ledger(ledger_path)
    entry = book.record(
        kind="netem",
        target=f"{target}/va",
        module="chaos_ext.network.actions",
        recipe={
            "target": target,
            "interface": "va",
            "spec": {},
            "snapshot": snapshot,
            "connection": {},
        },
    )
    sh("tc", "-n", veth_ns.ns, "qdisc", "replace", "dev", "va", "root", "handle", "1d1a:", "htb")
    assert "1d1a:" in tc_show(veth_ns.ns, "va")  # the fault is there, as tc shows it
    outcome = undo(entry, book)
    assert outcome.ok, outcome.note
    assert tc_show(veth_ns.ns, "va") == before
    assert book.open_entries() == []
