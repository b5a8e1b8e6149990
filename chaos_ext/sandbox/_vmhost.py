"""The vm backend: a supervisor process keeps a micro-VM running the netns sandbox.

``up`` starts ``python -m chaos_ext.sandbox._vmhost`` detached (tagged like
every sandbox process). The supervisor boots the VM (:mod:`chaos_ext._vm`),
runs ``gameday sandbox up --backend netns`` inside it, records the shared
folder in ``vm.json`` and waits for ``down`` (a request file) or its time cap.
Other gameday processes talk to the guest through that shared folder, the
agent's own file protocol: ``status`` and ``run`` submit commands there.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from chaos_ext import _helper
from chaos_ext._vm.machine import GuestProcess, VirtualMachine, VMConfig
from chaos_ext.errors import SandboxError
from chaos_ext.ledger import ledger_path
from chaos_ext.sandbox._services import token
from chaos_ext.sandbox._state import SandboxState, load_state, save_state, state_dir
from chaos_ext.sandbox._topology import topology

__all__ = ["down", "run", "status", "up"]

Progress = Callable[[str], None]
MAX_LIFETIME = 4 * 3600.0
GUEST_STATE = "/tmp/gameday"  # noqa: S108 - the guest's own tmpfs
BOOT_TIMEOUT = 900.0


def _guest_env() -> dict[str, str]:
    return {
        "GAMEDAY_LEDGER": f"{GUEST_STATE}/ledger.sqlite3",
        "GAMEDAY_SANDBOX_DIR": f"{GUEST_STATE}/sandbox",
        "PYTHONDONTWRITEBYTECODE": "1",
        "GAMEDAY_SANDBOX_SLOW": "1",
        "COLUMNS": "120",
    }


def _vm_file(prefix: str) -> Path:
    return state_dir(prefix) / "vm.json"


def up(prefix: str, app_mode: str, say: Progress) -> None:
    """Start the supervisor and wait until the sandbox runs inside the VM."""
    if load_state(prefix) is not None:
        raise SandboxError(f"sandbox {prefix!r} is already up: `gameday sandbox down` first")
    work = state_dir(prefix)
    work.mkdir(parents=True, exist_ok=True)
    log = work / "vmhost.log"
    env = {**os.environ, _helper.TOKEN_VAR: token(prefix)}
    with log.open("ab") as handle:
        subprocess.Popen(
            [sys.executable, "-m", "chaos_ext.sandbox._vmhost", "--prefix", prefix,
             "--app", app_mode],
            stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT,
            start_new_session=True, env=env, cwd=Path.cwd(),
        )  # fmt: skip
    shown = 0
    deadline = time.monotonic() + BOOT_TIMEOUT
    while time.monotonic() < deadline:
        lines = log.read_text(errors="replace").splitlines()
        for line in lines[shown:]:
            say(line)
        shown = len(lines)
        info = _read_json(_vm_file(prefix))
        if info.get("status") == "up":
            return
        if info.get("status") == "failed":
            down(prefix, say)
            raise SandboxError(f"the sandbox VM failed to start: {info.get('error')}")
        time.sleep(0.5)
    down(prefix, say)
    raise SandboxError(f"the sandbox VM was not up within {BOOT_TIMEOUT:.0f} s (see {log})")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data


class _Guest:
    """A client of a running VM's agent, from any host process (a GuestChannel)."""

    def __init__(self, prefix: str) -> None:
        info = _read_json(_vm_file(prefix))
        if info.get("status") != "up":
            raise SandboxError(f"sandbox {prefix!r} has no running VM")
        self.share = Path(info["share"])
        self.supervisor = int(info["supervisor_pid"])

    def check_alive(self) -> None:
        if not Path(f"/proc/{self.supervisor}").exists():
            raise SandboxError("the sandbox VM's supervisor is gone: `gameday sandbox down`")

    def spawn(self, argv: list[str], timeout: float, cwd: str | None = None) -> GuestProcess:
        cid = os.urandom(6).hex()
        request = {"argv": argv, "env": _guest_env(), "cwd": cwd, "timeout": timeout}
        tmp = self.share / f".{cid}.json"
        tmp.write_text(json.dumps(request))
        os.replace(tmp, self.share / "req" / f"{cid}.json")
        return GuestProcess(self, cid, tuple(argv))


def status(prefix: str) -> dict[str, Any]:
    """The guest sandbox's status, marked as running in the vm backend."""
    state = load_state(prefix)
    guest = _Guest(prefix)
    cli = [sys.executable, "-m", "chaos_ext.cli.main", "sandbox", "status", "--json",
           "--prefix", prefix]  # fmt: skip
    result = guest.spawn(cli, timeout=120).wait(180)
    try:
        report: dict[str, Any] = json.loads(result.stdout)
    except ValueError as exc:
        raise SandboxError(f"sandbox status in the VM failed: {result.stderr[-300:]}") from exc
    report["backend"] = "vm"
    report["app_mode"] = state.app_mode if state else report.get("app_mode")
    return report


def run(prefix: str, argv: Sequence[str], journal_dir: Path, timeout: float) -> int:
    """Run ``gameday <argv>`` in the guest's monitoring namespace, streaming its output;
    copy the journals it wrote to ``journal_dir``."""
    guest = _Guest(prefix)
    outdir = guest.share / "journals" / os.urandom(4).hex()
    outdir.mkdir(parents=True)
    guest_dir = f"/run/vmshare/journals/{outdir.name}"
    mon = topology(prefix).host("mon").netns
    vars_file = f"{GUEST_STATE}/sandbox/{prefix}/vars.json"
    cli = ["ip", "netns", "exec", mon, sys.executable, "-m", "chaos_ext.cli.main",
           argv[0], "--var-file", vars_file, "--journal-dir", guest_dir, *argv[1:]]  # fmt: skip
    proc = guest.spawn(cli, timeout=timeout, cwd=str(Path.cwd()))
    shown = 0
    while not proc.finished():
        guest.check_alive()
        out, err = proc.output()
        text = out + err
        sys.stderr.write(text[shown:])
        sys.stderr.flush()
        shown = len(text)
        time.sleep(0.5)
    result = proc.wait(60)
    sys.stderr.write((result.stdout + result.stderr)[shown:])
    journal_dir.mkdir(parents=True, exist_ok=True)
    for journal in outdir.glob("*.json"):
        shutil.copy2(journal, journal_dir / journal.name)
    return result.exit_code if result.exit_code is not None else 2


def down(prefix: str, say: Progress) -> None:
    """Ask the supervisor to stop the guest sandbox and the VM; kill what is left."""
    work = state_dir(prefix)
    info = _read_json(_vm_file(prefix))
    pid = info.get("supervisor_pid")
    if pid and Path(f"/proc/{pid}").exists():
        (work / "down.request").write_text("")
        deadline = time.monotonic() + 180
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.5)
    stopped = _helper.stop_helpers(token(prefix), grace=10.0)
    shutil.rmtree(work, ignore_errors=True)
    say(f"sandbox VM stopped ({stopped} leftover process(es) killed)")


def _log(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _supervise(prefix: str, app_mode: str) -> None:
    work = state_dir(prefix)
    vm_dir = Path(os.environ.get("GAMEDAY_VM_DIR", str(ledger_path().parent / "vm")))
    config = VMConfig(work_dir=vm_dir, memory_mb=2048, cpus=2, boot_timeout=600)
    vm = VirtualMachine(config)
    try:
        _log(
            "booting the micro-VM (Debian kernel; emulated unless KVM works)",
        )
        vm.start()
        _log(
            f"VM up ({vm.accel}); building the sandbox inside it",
        )
        cli = [sys.executable, "-m", "chaos_ext.cli.main", "sandbox", "up", "--backend", "netns",
               "--prefix", prefix, "--app", app_mode]  # fmt: skip
        result = vm.run(cli, timeout=600, env=_guest_env())
        _log(
            (result.stdout + result.stderr).strip(),
        )
        if result.exit_code != 0:
            raise SandboxError(f"sandbox up inside the VM failed (exit {result.exit_code})")
        save_state(SandboxState(prefix, "vm", app_mode, time.time(), dirs=[str(vm.share.parent)]))
        _vm_file(prefix).write_text(json.dumps(
            {"status": "up", "share": str(vm.share), "supervisor_pid": os.getpid(),
             "accel": vm.accel}
        ))  # fmt: skip
        _wait_for_down(work, vm)
        _log(
            "stopping the sandbox inside the VM",
        )
        vm.run([*cli[:4], "down", "--prefix", prefix], timeout=120, env=_guest_env())
    except Exception as exc:  # noqa: BLE001 - reported to the waiting `up` through vm.json
        _vm_file(prefix).write_text(json.dumps({"status": "failed", "error": str(exc)[-2000:]}))
    finally:
        vm.stop()
        shutil.rmtree(vm.share.parent, ignore_errors=True)


def _wait_for_down(work: Path, vm: VirtualMachine) -> None:
    deadline = time.monotonic() + MAX_LIFETIME
    while time.monotonic() < deadline and not (work / "down.request").exists():
        vm.check_alive()
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="gameday-sandbox-vmhost")
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--app", default="fragile")
    args = parser.parse_args(argv)
    _supervise(args.prefix, args.app)


if __name__ == "__main__":
    main()
