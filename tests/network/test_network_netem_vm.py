"""The real fault on a real kernel (runs inside the qemu micro-VM lane; skips elsewhere).

Topology: namespaces app, db, other behind a router namespace (veth pairs):
app 10.77.1.2 -> router -> db 10.77.2.2 / other 10.77.3.2. RTT is TCP
connect time from app (one SYN/SYN-ACK round trip), medians of many samples
against a baseline measured in the same VM.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.netlab import gameday_process, kernel_has_netem, sh, tc_show

from chaos_ext._core.ledger import Ledger, undo
from chaos_ext.errors import PreflightFailed
from chaos_ext.network import actions, probes

pytestmark = [
    pytest.mark.vm,
    pytest.mark.skipif(not kernel_has_netem(), reason="kernel without sch_netem: VM lane only"),
]

SAMPLES = 21
DELAY_MS = 150.0
DELAY_SECONDS = DELAY_MS / 1000


@dataclass(frozen=True)
class Topology:
    app: str
    db: str
    other: str
    router: str
    db_port: int
    db_port2: int
    other_port: int

    def rtt(self, host: str, port: int, samples: int = SAMPLES) -> float:
        """The path's round trip: the fastest of ``samples`` TCP connects. Under emulation
        on a busy host, scheduling only ever adds delay to a sample (one-sided noise: medians
        of 7 moved by up to 15 ms at load 11-14), while netem's delay is in every sample."""
        return float(probes.measure_rtt(host, port, samples=samples, netns=self.app)["min_ms"])


def _listen(ns: str, host: str) -> tuple[socket.socket, int]:
    sock = probes._socket_in(ns, socket.AF_INET)
    sock.bind((host, 0))
    sock.listen(128)
    sock.settimeout(0.2)
    return sock, int(sock.getsockname()[1])


def _serve(sock: socket.socket, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            conn, _ = sock.accept()
            conn.close()
        except OSError:
            continue


def _link(router: str, ns: str, subnet: int, suffix: str) -> None:
    inside, outside = f"e{suffix}", f"r{suffix}"
    sh(
        "ip",
        "link",
        "add",
        inside,
        "netns",
        ns,
        "type",
        "veth",
        "peer",
        "name",
        outside,
        "netns",
        router,
    )
    sh("ip", "-n", ns, "addr", "add", f"10.77.{subnet}.2/24", "dev", inside)
    sh("ip", "-n", ns, "link", "set", inside, "name", "eth0")
    sh("ip", "-n", ns, "link", "set", "eth0", "up")
    sh("ip", "-n", ns, "link", "set", "lo", "up")
    sh("ip", "-n", ns, "route", "add", "default", "via", f"10.77.{subnet}.1")
    sh("ip", "-n", router, "addr", "add", f"10.77.{subnet}.1/24", "dev", outside)
    sh("ip", "-n", router, "link", "set", outside, "up")


@pytest.fixture(scope="module")
def topo() -> Iterator[Topology]:
    tag = uuid.uuid4().hex[:4]
    names = {role: f"{role}-{tag}" for role in ("app", "db", "other", "router")}
    for ns in names.values():
        sh("ip", "netns", "add", ns)
    stop = threading.Event()
    socks: list[socket.socket] = []
    try:
        sh("ip", "netns", "exec", names["router"], "sysctl", "-qw", "net.ipv4.ip_forward=1")
        for subnet, role in enumerate(("app", "db", "other"), start=1):
            _link(names["router"], names[role], subnet, f"{role[0]}{tag}")
        listeners = [
            _listen(names["db"], "10.77.2.2"),
            _listen(names["db"], "10.77.2.2"),
            _listen(names["other"], "10.77.3.2"),
        ]
        for sock, _ in listeners:
            socks.append(sock)
            threading.Thread(target=_serve, args=(sock, stop), daemon=True).start()
        yield Topology(
            names["app"],
            names["db"],
            names["other"],
            names["router"],
            listeners[0][1],
            listeners[1][1],
            listeners[2][1],
        )
    finally:
        stop.set()
        for sock in socks:
            sock.close()
        for ns in names.values():
            sh("ip", "netns", "delete", ns, check=False)


@pytest.fixture
def pre_existing_tbf(topo: Topology) -> Iterator[str]:
    """A non-default root the fault must give back: tbf at a rate that does not shape."""
    sh(
        "tc",
        "-n",
        topo.app,
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
    yield tc_show(topo.app, "eth0")
    sh("tc", "-n", topo.app, "qdisc", "del", "dev", "eth0", "root", check=False)


def test_scoped_delay_is_precise_and_remove_restores_everything(
    topo: Topology, pre_existing_tbf: str, ledger_path: Path
) -> None:
    base_db, base_other = (
        topo.rtt("10.77.2.2", topo.db_port),
        topo.rtt("10.77.3.2", topo.other_port),
    )
    out = actions.add_latency("eth0", DELAY_SECONDS, ["10.77.2.0/24"], target=f"netns:{topo.app}")
    assert out["previous_root"] == "tbf"
    added_db = topo.rtt("10.77.2.2", topo.db_port) - base_db
    added_other = topo.rtt("10.77.3.2", topo.other_port) - base_other
    assert abs(added_db - DELAY_MS) <= 0.10 * DELAY_MS, (base_db, added_db)
    assert added_other < 5, (base_other, added_other)
    assert probes.qdisc_state("eth0", target=f"netns:{topo.app}")["latency_active"]

    removed = actions.remove_latency("eth0", target=f"netns:{topo.app}")
    assert removed["undone"] == 1 and "restored (tbf)" in removed["faults"][0]["note"]
    assert tc_show(topo.app, "eth0") == pre_existing_tbf
    assert topo.rtt("10.77.2.2", topo.db_port) - base_db < 5
    assert Ledger(ledger_path).open_entries() == []


def _shaped_htb(ns: str) -> str:
    tc = ["tc", "-n", ns]
    sh(*tc, "qdisc", "add", "dev", "eth0", "root", "handle", "5:", "htb", "default", "20")
    sh(
        *tc,
        "class",
        "add",
        "dev",
        "eth0",
        "parent",
        "5:",
        "classid",
        "5:20",
        "htb",
        "rate",
        "1gbit",
    )
    sh(*tc, "qdisc", "add", "dev", "eth0", "parent", "5:20", "handle", "6:", "sfq")
    sh(
        *tc,
        "class",
        "add",
        "dev",
        "eth0",
        "parent",
        "5:",
        "classid",
        "5:30",
        "htb",
        "rate",
        "1gbit",
    )
    sh(
        *tc,
        "qdisc",
        "add",
        "dev",
        "eth0",
        "parent",
        "5:30",
        "handle",
        "8:",
        "pfifo",
        "limit",
        "500",
    )
    sh(
        *tc,
        "filter",
        "add",
        "dev",
        "eth0",
        "parent",
        "5:",
        "protocol",
        "ip",
        "prio",
        "3",
        "u32",
        "match",
        "ip",
        "dst",
        "10.77.3.0/24",
        "flowid",
        "5:20",
    )
    return tc_show(ns, "eth0")


def test_port_scope_and_ledger_undo_restore_an_htb_tree(topo: Topology, ledger_path: Path) -> None:
    before = _shaped_htb(topo.app)
    try:
        base = topo.rtt("10.77.2.2", topo.db_port2)
        actions.add_latency(
            "eth0", DELAY_SECONDS, ["10.77.2.2"], ports=[topo.db_port], target=f"netns:{topo.app}"
        )
        assert topo.rtt("10.77.2.2", topo.db_port, samples=7) - base > 0.8 * DELAY_MS
        assert topo.rtt("10.77.2.2", topo.db_port2) - base < 5  # same host, other port
        (entry,) = Ledger(ledger_path).open_entries()
        assert entry.recipe["snapshot"]["root_kind"] == "htb"
        outcome = undo(entry)
        assert outcome.ok, outcome.note
        assert tc_show(topo.app, "eth0") == before
        assert topo.rtt("10.77.2.2", topo.db_port, samples=7) - base < 5
    finally:
        sh("tc", "-n", topo.app, "qdisc", "del", "dev", "eth0", "root", check=False)


@pytest.mark.timeout(480)
def test_sigkill_mid_fault_then_gameday_rollback(
    topo: Topology,
    ledger_path: Path,
    tmp_path: Path,
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    base = topo.rtt("10.77.2.2", topo.db_port, samples=7)
    experiment = {
        "title": "latency then crash",
        "description": "SIGKILL while the delay is on",
        "method": [
            {
                "type": "action",
                "name": "delay-db",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.network.actions",
                    "func": "add_latency",
                    "arguments": {
                        "interface": "eth0",
                        "delay_seconds": DELAY_SECONDS,
                        "destinations": ["10.77.2.0/24"],
                        "target": f"netns:{topo.app}",
                    },
                },
            },
            {
                "type": "probe",
                "name": "hold",
                "provider": {
                    "type": "process",
                    "path": "sleep",
                    "arguments": "120",
                    "timeout": 150,
                },
            },
        ],
    }
    path = tmp_path / "exp.json"
    path.write_text(json.dumps(experiment))
    proc = gameday_process(ledger_path, tmp_path, "run", "--journal", "j.json", str(path))
    try:
        deadline = time.monotonic() + 360  # gameday's start-up is slow under emulation
        while "1d1b:" not in sh("tc", "-n", topo.app, "qdisc", "show", "dev", "eth0").stdout:
            log = (tmp_path / "gameday.log").read_text(errors="replace")
            assert proc.poll() is None, f"gameday run ended early:\n{log}"
            assert time.monotonic() < deadline, f"the delay never appeared:\n{log}"
            time.sleep(1)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert topo.rtt("10.77.2.2", topo.db_port, samples=5) - base > 0.8 * DELAY_MS
    result = gameday("rollback", timeout=180)
    assert result.returncode == 0, result.stderr
    assert "netem" not in tc_show(topo.app, "eth0")
    assert topo.rtt("10.77.2.2", topo.db_port, samples=7) - base < 5
    assert Ledger(ledger_path).open_entries() == []


def test_remote_apply_over_ssh_on_a_real_kernel(
    topo: Topology, ledger_path: Path, tmp_path: Path
) -> None:
    """sshd inside the app namespace stands for a node: the fault is built by its `tc`."""
    from pyroute2 import netns  # noqa: PLC0415
    from support.servers import sshd  # noqa: PLC0415

    base = topo.rtt("10.77.2.2", topo.db_port, samples=7)
    prefix = ["ip", "netns", "exec", topo.app]
    with sshd.start(workdir=tmp_path / "sshd", netns_prefix=prefix) as server:
        conf = {"ssh_known_hosts": str(server.known_hosts)}
        sec = {"ssh_user": "root", "ssh_key_file": str(server.client_key)}
        target = f"ssh:{server.host}:{server.port}"
        netns.pushns(topo.app)  # the client's sockets live where the node's sshd listens
        try:
            out = actions.add_latency(
                "eth0",
                DELAY_SECONDS,
                ["10.77.2.0/24"],
                target=target,
                configuration=conf,
                secrets=sec,
            )
        finally:
            netns.popns()
        assert out["kernel"].startswith("6.1")
        assert "1d1b:" in tc_show(topo.app, "eth0")
        assert abs(topo.rtt("10.77.2.2", topo.db_port, samples=9) - base - DELAY_MS) < 20
        netns.pushns(topo.app)
        try:
            removed = actions.remove_latency("eth0", target=target)  # ledger has the recipe
        finally:
            netns.popns()
        assert removed["undone"] == 1, removed
        assert "htb" not in tc_show(topo.app, "eth0")
        # a configured root cannot be replayed exactly with tc: refused, nothing changed
        sh(
            "tc",
            "-n",
            topo.app,
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
        before = tc_show(topo.app, "eth0")
        netns.pushns(topo.app)
        try:
            with pytest.raises(PreflightFailed, match="configured root qdisc \\(tbf\\)"):
                actions.add_latency(
                    "eth0",
                    DELAY_SECONDS,
                    ["10.77.2.0/24"],
                    target=target,
                    configuration=conf,
                    secrets=sec,
                )
        finally:
            netns.popns()
            assert tc_show(topo.app, "eth0") == before
            sh("tc", "-n", topo.app, "qdisc", "del", "dev", "eth0", "root")
    assert Ledger(ledger_path).open_entries() == []


def test_duration_removes_the_delay_by_itself(topo: Topology, ledger_path: Path) -> None:
    base = topo.rtt("10.77.2.2", topo.db_port, samples=5)
    out = actions.add_latency(
        "eth0", DELAY_SECONDS, ["10.77.2.0/24"], target=f"netns:{topo.app}", duration_seconds=3
    )
    assert out["duration_seconds"] == 3
    assert Ledger(ledger_path).open_entries()  # recorded while it lasts
    deadline = time.monotonic() + 60
    while Ledger(ledger_path).open_entries():
        assert time.monotonic() < deadline, "the delay did not end by itself"
        time.sleep(0.5)
    assert "netem" not in tc_show(topo.app, "eth0")
    assert topo.rtt("10.77.2.2", topo.db_port, samples=5) - base < 5
