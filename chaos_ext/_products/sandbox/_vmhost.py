"""The vm backend's node: a supervisor process keeps the micro-VM that forwards app->db.

``start`` launches ``python -m chaos_ext._products.sandbox._vmhost`` detached (tagged like
every sandbox process, so ``sandbox down`` finds it). The supervisor makes the
taps (:func:`chaos_ext._products.sandbox._node.open_taps`), boots the VM with them
(:mod:`chaos_ext._products.sandbox.vm`: one emulated CPU, 256 MB), configures the guest as a
router, starts the guest's sshd on the node's bridge address (keys in the VM's
shared folder) and records all that in ``node.json``: ``{"status": "up",
"ssh": {...}, "qemu_pid": ...}`` or ``{"status": "failed", "error": ...}``.
It then waits for ``down.request`` (``stop``) or its time cap and powers the VM off.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chaos_ext._core import helper as _helper
from chaos_ext._core import procfs as _procfs
from chaos_ext._core.ledger import ledger_path
from chaos_ext._products.sandbox import _node
from chaos_ext._products.sandbox._services import token
from chaos_ext._products.sandbox._state import state_dir
from chaos_ext._products.sandbox._topology import topology
from chaos_ext._products.sandbox.errors import SandboxError
from chaos_ext._products.sandbox.vm.initramfs import SHARE_IN_GUEST
from chaos_ext._products.sandbox.vm.machine import VirtualMachine, VMConfig

__all__ = ["info", "start", "stop", "wait_up"]

Progress = Callable[[str], None]
MAX_LIFETIME = 4 * 3600.0
BOOT_TIMEOUT = 300.0
"""Boots measured 9-18 s under emulation on 2 busy cores; the cap is for a machine far worse."""
HEARTBEAT = 5.0
SSH_PORT = 22


def _node_file(prefix: str) -> Path:
    return state_dir(prefix) / "node.json"


def info(prefix: str) -> dict[str, Any]:
    """What ``node.json`` says (``{}`` before the supervisor wrote it)."""
    try:
        data: dict[str, Any] = json.loads(_node_file(prefix).read_text())
    except (OSError, ValueError):
        return {}
    return data


def start(prefix: str) -> None:
    """Launch the supervisor in the background; ``wait_up`` follows its progress."""
    work = state_dir(prefix)
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, _helper.TOKEN_VAR: token(prefix)}
    with (work / "node.log").open("ab") as handle:
        subprocess.Popen(
            [sys.executable, "-m", "chaos_ext._products.sandbox._vmhost", "--prefix", prefix],
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=Path.cwd(),
        )


def wait_up(prefix: str, say: Progress) -> dict[str, Any]:
    """Wait for the node (its log lines and a heartbeat every 5 s); SandboxError if it failed."""
    log = state_dir(prefix) / "node.log"
    started = time.monotonic()
    shown, last_said = 0, started
    while time.monotonic() - started < BOOT_TIMEOUT + 60:
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        for line in lines[shown:]:
            say(f"node: {line}")
            last_said = time.monotonic()
        shown = len(lines)
        state = info(prefix)
        if state.get("status") == "up":
            return state
        if state.get("status") == "failed":
            raise SandboxError(f"the node VM failed to start: {state.get('error')}")
        if time.monotonic() - last_said >= HEARTBEAT:
            say(f"node: still booting ({time.monotonic() - started:.0f} s)")
            last_said = time.monotonic()
        time.sleep(0.5)
    raise SandboxError(f"the node VM was not up within {BOOT_TIMEOUT + 60:.0f} s (see {log})")


def stop(prefix: str, timeout: float = 60.0) -> bool:
    """Ask the supervisor to power the VM off and wait for it; False if none was running."""
    pid = info(prefix).get("supervisor_pid")
    if not pid or not _procfs.exists(int(pid)):
        return False
    (state_dir(prefix) / "down.request").write_text("")
    deadline = time.monotonic() + timeout
    while _procfs.exists(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return True


def _log(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _write(prefix: str, data: dict[str, Any]) -> None:
    path = _node_file(prefix)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _configure(vm: VirtualMachine, prefix: str) -> dict[str, Any]:
    """Make the guest a router and start its sshd; the client side of SSH for node.json."""
    topo = topology(prefix)
    (vm.share / "node-net.batch").write_text(_node.guest_network_batch(topo))
    for argv in (
        ["ip", "-batch", f"{SHARE_IN_GUEST}/node-net.batch"],
        ["sysctl", "-q", "-w", *_node.GUEST_SYSCTLS],
    ):
        done = vm.run(argv, timeout=60)
        if done.exit_code != 0:
            raise SandboxError(f"node VM: {' '.join(argv)} failed: {done.stderr.strip()}")
    files = _node.prepare_sshd(
        vm.share / "sshd", f"{SHARE_IN_GUEST}/sshd", topo.node_address, SSH_PORT
    )
    vm.spawn([_node.SSHD, "-D", "-e", "-f", files.config_in_guest], timeout=MAX_LIFETIME)
    deadline = time.monotonic() + 60
    while not files.pid_file.exists():
        vm.check_alive()
        if time.monotonic() > deadline:
            raise SandboxError("the node VM's sshd did not start within 60 s")
        time.sleep(0.1)
    return {
        "host": topo.node_address,
        "port": SSH_PORT,
        "key_file": str(files.client_key),
        "known_hosts": str(files.known_hosts),
    }


def _supervise(prefix: str) -> None:
    started = time.monotonic()
    vm_dir = Path(os.environ.get("GAMEDAY_VM_DIR", str(ledger_path().parent / "vm")))
    vm: VirtualMachine | None = None
    try:
        taps = _node.open_taps(topology(prefix))
        _log("booting the node VM (Debian's kernel for netem; 1 CPU, emulated unless KVM works)")
        config = VMConfig(
            work_dir=vm_dir, memory_mb=256, cpus=1, boot_timeout=BOOT_TIMEOUT, tap_fds=taps
        )
        vm = VirtualMachine(config)
        vm.start()
        for fd in taps:  # qemu holds them now; the taps go when it exits
            os.close(fd)
        _log(f"VM booted ({vm.accel}, {time.monotonic() - started:.0f} s): routing, sshd")
        ssh = _configure(vm, prefix)
        _write(
            prefix,
            {
                "status": "up",
                "supervisor_pid": os.getpid(),
                "qemu_pid": vm.pid,
                "accel": vm.accel,
                "kernel": vm.kernel_release,
                "ssh": ssh,
                "boot_seconds": round(time.monotonic() - started, 1),
            },
        )
        _wait_for_down(state_dir(prefix), vm)
    except Exception as exc:  # noqa: BLE001 - reported to the waiting `up` through node.json
        _write(prefix, {"status": "failed", "error": str(exc)[-2000:]})
    finally:
        if vm is not None:
            vm.stop()
            shutil.rmtree(vm.share.parent, ignore_errors=True)


def _wait_for_down(work: Path, vm: VirtualMachine) -> None:
    deadline = time.monotonic() + MAX_LIFETIME
    while time.monotonic() < deadline and not (work / "down.request").exists():
        vm.check_alive()
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="gameday-sandbox-node")
    parser.add_argument("--prefix", required=True)
    args = parser.parse_args(argv)
    _supervise(args.prefix)


if __name__ == "__main__":
    main()
