"""Benchmark: scoped netem apply+remove through pyroute2 (netlink) vs the ``tc`` CLI.

Runs on a kernel with netem; on a host without it (this machine) it boots the
qemu micro-VM and runs itself inside. In the same run it measures:

* speed: median seconds of one apply+remove cycle (the scoped tree: htb root,
  two classes, a netem leaf, a u32 filter; then delete the root), 50 cycles
  each way; ratio = tc CLI median / pyroute2 median (goal >= 3);
* fidelity: measured added RTT (TCP connect median, app -> db namespace,
  against a baseline measured just before) / requested delay (goal 0.95-1.05).

Last line: ``netem apply_speedup_vs_tc=<x> fidelity=<y>``.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chaos_ext._core.targets.spec import Target  # noqa: E402
from chaos_ext.network import _local, _spec, _tree, probes  # noqa: E402

CYCLES = 50
REQUESTED_MS = 100.0
RTT_SAMPLES = 31


def sh(*argv: str) -> None:
    subprocess.run(list(argv), check=True, timeout=30, capture_output=True)


def topology(tag: str) -> tuple[str, str]:
    app, db = f"bapp-{tag}", f"bdb-{tag}"
    for ns in (app, db):
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    sh(
        "ip",
        "link",
        "add",
        "eth0",
        "netns",
        app,
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        db,
    )
    for ns, addr in ((app, "10.88.0.1/24"), (db, "10.88.0.2/24")):
        sh("ip", "-n", ns, "addr", "add", addr, "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
    return app, db


def serve(db: str, stop: threading.Event) -> int:
    sock = probes._socket_in(db, socket.AF_INET)
    sock.bind(("10.88.0.2", 0))
    sock.listen(128)
    sock.settimeout(0.2)

    def loop() -> None:
        while not stop.is_set():
            try:
                sock.accept()[0].close()
            except OSError:
                continue
        sock.close()

    threading.Thread(target=loop, daemon=True).start()
    return int(sock.getsockname()[1])


def time_pyroute2(app: str, spec: _spec.LatencySpec) -> list[float]:
    target = Target("netns", name=app)

    def cycles(ipr: Any) -> list[float]:
        index = _local.interface_index(ipr, target, "eth0")
        times = []
        for _ in range(CYCLES):
            start = time.perf_counter()
            _tree.apply_tree(ipr, index, spec)
            _tree.delete_root(ipr, index)
            times.append(time.perf_counter() - start)
        return times

    return _local.with_route(target, cycles)


def time_tc(app: str, spec: _spec.LatencySpec) -> list[float]:
    # tc -n NS: the namespace switch is tc's own, as a user would run it
    argvs = [["tc", "-n", app, *argv[1:]] for argv in _spec.tc_apply_argvs(spec, "eth0")]
    delete = ["tc", "-n", app, "qdisc", "del", "dev", "eth0", "root"]
    times = []
    for _ in range(CYCLES):
        start = time.perf_counter()
        for argv in [*argvs, delete]:
            subprocess.run(argv, check=True, timeout=30, capture_output=True)
        times.append(time.perf_counter() - start)
    return times


def fidelity(app: str, port: int, spec: _spec.LatencySpec) -> float:
    def rtt() -> float:
        return float(
            probes.measure_rtt("10.88.0.2", port, samples=RTT_SAMPLES, netns=app)["median_ms"]
        )

    base = rtt()
    _local.apply(Target("netns", name=app), "eth0", spec)
    delayed = rtt()
    sh("tc", "-n", app, "qdisc", "del", "dev", "eth0", "root")
    print(f"baseline RTT median {base:.2f} ms, with {REQUESTED_MS:g} ms: {delayed:.2f} ms")
    return (delayed - base) / REQUESTED_MS


def inside() -> None:
    tag = uuid.uuid4().hex[:6]
    app, db = topology(tag)
    stop = threading.Event()
    try:
        port = serve(db, stop)
        spec = _spec.check_latency_arguments(
            {
                "interface": "eth0",
                "delay_seconds": REQUESTED_MS / 1000,
                "destinations": ["10.88.0.2/32"],
                "ports": [port],
            }
        )
        fid = fidelity(app, port, spec)
        netlink = statistics.median(time_pyroute2(app, spec))
        cli = statistics.median(time_tc(app, spec))
        print(
            f"apply+remove median: pyroute2 {netlink * 1000:.2f} ms, tc CLI {cli * 1000:.2f} ms "
            f"({CYCLES} cycles each)"
        )
        print(f"netem apply_speedup_vs_tc={cli / netlink:.2f} fidelity={fid:.3f}")
    finally:
        stop.set()
        for ns in (app, db):
            subprocess.run(["ip", "netns", "delete", ns], check=False, timeout=30)


def in_vm() -> None:
    from chaos_ext._products.sandbox.vm.lane import run_in_vm  # noqa: PLC0415
    from chaos_ext._products.sandbox.vm.machine import VMConfig  # noqa: PLC0415

    config = VMConfig(work_dir=ROOT / ".vm", cwd=ROOT)
    result, vm = run_in_vm(
        [sys.executable, "benchmarks/netem.py", "--inside"], config=config, timeout=600
    )
    print(f"(inside the qemu micro-VM, kernel {vm.kernel_release}, {vm.accel})")
    sys.stdout.write(result.stdout)
    if result.exit_code != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(result.exit_code or 1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--inside", action="store_true", help="run here (a kernel with netem)")
    if parser.parse_args().inside or not _local.missing_features():
        inside()
    else:
        in_vm()
