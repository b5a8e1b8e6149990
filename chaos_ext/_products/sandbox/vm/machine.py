"""Host side of the micro-VM: boot Debian's kernel in qemu, run commands in it, stop it.

::

    with VirtualMachine(VMConfig(work_dir=Path(".vm"))) as vm:   # boots (TCG unless KVM works)
        result = vm.run(["tc", "qdisc", "show"], timeout=30)      # stdout, stderr, exit code
        server = vm.spawn(["python3", "-m", "http.server"])       # long-lived, in the background
        ...                                                       # talk to it (forwarded ports,
        server.stop()                                             # files in vm.share)
    # the VM powered off; the share (results, JUnit files) stays in vm.share

The guest sees the host's root read-only (so the host's python, venv and
tools run unchanged), a tmpfs on /tmp and /run, and ``/run/vmshare``: a
writable folder that is ``vm.share`` on the host. Nothing the guest does
touches the host's network: the VM has no network device unless
``forward_ports`` asks for one (user-mode, ``restrict=on``: no way out, only
the listed host->guest TCP forwards on 127.0.0.1).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from chaos_ext._products.sandbox.errors import SandboxError
from chaos_ext._products.sandbox.vm.initramfs import (
    BOOT_MARKER,
    HOST_TMP_IN_GUEST,
    SHARE_IN_GUEST,
    build_initramfs,
    newest_kernel,
    qemu_available,
)
from chaos_ext._products.sandbox.vm.kernel import boot_image

__all__ = [
    "CommandResult",
    "GuestChannel",
    "GuestProcess",
    "VMConfig",
    "VirtualMachine",
    "kvm_works",
    "tap_mac",
]

GUEST_IP = "10.0.2.15"
_VIRTFS = "security_model=none,multidevs=remap"


@dataclass(frozen=True)
class VMConfig:
    """How to boot the micro-VM. ``accel``: "tcg", "kvm" or "auto" (KVM only if a probe works)."""

    work_dir: Path = Path(".vm")
    kernel_release: str | None = None
    memory_mb: int = 1024
    cpus: int = 2
    accel: str = "auto"
    boot_timeout: float = 180.0
    forward_ports: tuple[int, ...] = ()
    """Guest TCP ports reachable from the host on 127.0.0.1 (see ``VirtualMachine.host_port``)."""
    tap_fds: tuple[int, ...] = ()
    """Open tap devices (file descriptors this process holds), one virtio NIC each: the guest
    sees them as eth0, eth1... in this order (after the forward_ports NIC, if any). The host
    side stays where the tap was made, e.g. inside a network namespace of a sandbox."""
    python: str = sys.executable
    cwd: Path = field(default_factory=Path.cwd)


@dataclass(frozen=True)
class CommandResult:
    """A finished guest command."""

    argv: tuple[str, ...]
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float


class GuestChannel(Protocol):
    """What a guest command needs of its VM: the shared folder and a liveness check
    (a :class:`VirtualMachine`, or a client of one that another process runs)."""

    share: Path

    def check_alive(self) -> None: ...


class GuestProcess:
    """A command running in the guest; ``wait()`` for its result or ``stop()`` it."""

    def __init__(self, vm: GuestChannel, cid: str, argv: tuple[str, ...]) -> None:
        self.vm, self.cid, self.argv = vm, cid, argv

    def output(self) -> tuple[str, str]:
        """What it printed so far (stdout, stderr)."""
        out = self.vm.share / "out"
        return (_read(out / f"{self.cid}.out"), _read(out / f"{self.cid}.err"))

    def finished(self) -> bool:
        return (self.vm.share / "res" / f"{self.cid}.json").exists()

    def wait(self, timeout: float) -> CommandResult:
        """Wait for the command; raises SandboxError if not done in ``timeout`` seconds."""
        path = self.vm.share / "res" / f"{self.cid}.json"
        deadline = time.monotonic() + timeout
        while not path.exists():
            self.vm.check_alive()
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"guest command {list(self.argv)} still running after {timeout} s"
                )
            time.sleep(0.1)
        result = json.loads(path.read_text())
        stdout, stderr = self.output()
        return CommandResult(
            self.argv, result["exit_code"], stdout, stderr, result["timed_out"], result["seconds"]
        )

    def stop(self, timeout: float = 30.0) -> CommandResult:
        """SIGTERM (then SIGKILL) the command's process group and return its result."""
        if not self.finished():
            (self.vm.share / "req" / f"{self.cid}.kill").write_text("")
        return self.wait(timeout)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


class VirtualMachine:
    """One booted micro-VM (a context manager: boots on enter, powers off on exit)."""

    def __init__(self, config: VMConfig | None = None) -> None:
        self.config = config or VMConfig()
        self.kernel_release = self.config.kernel_release or newest_kernel()
        self.kernel_image = Path(f"/boot/vmlinuz-{self.kernel_release}")
        run_dir = self.config.work_dir.resolve() / "runs" / uuid.uuid4().hex[:10]
        self.share = run_dir / "share"
        self.console_log = run_dir / "console.log"
        self.accel = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._ports: dict[int, int] = {}

    def __enter__(self) -> VirtualMachine:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Boot and wait until the guest agent is ready (raises SandboxError with the console)."""
        if not qemu_available():
            raise SandboxError("qemu-system-x86_64 is missing: install Debian's qemu-system-x86")
        cache = self.config.work_dir.resolve() / "cache"
        initrd = build_initramfs(self.kernel_release, cache)
        self.kernel_image = boot_image(self.kernel_release, cache)
        self.share.mkdir(parents=True)
        for sub in ("req", "out", "res"):
            (self.share / sub).mkdir()
        (self.share / "boot.sh").write_text(self._boot_script())
        self.accel = self._pick_accel(initrd, cache)
        self._proc = self._launch(initrd, self.accel, self.console_log)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _boot_script(self) -> str:
        lines = [
            "#!/bin/sh",
            "export HOME=/tmp PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ]
        if self.config.forward_ports:
            lines += [
                "ip link set eth0 up",
                f"ip addr add {GUEST_IP}/24 dev eth0",
            ]
        for top in _host_tmp_dirs(self.config.cwd, Path(self.config.python)):
            # a checkout under the host's /tmp (a CI clone) is hidden by the guest's tmpfs
            lines.append(f"mkdir -p {shlex.quote(str(top))}")
            source = f"{HOST_TMP_IN_GUEST}/{top.name}"
            lines.append(f"mount --bind {shlex.quote(source)} {shlex.quote(str(top))}")
        lines.append(f"cd {shlex.quote(str(self.config.cwd))}")
        lines.append(
            f"exec {shlex.quote(self.config.python)} -m chaos_ext._products.sandbox.vm.agent "
            f"{SHARE_IN_GUEST}"
        )
        return "\n".join(lines) + "\n"

    def _qemu_argv(self, initrd: Path, accel: str, with_taps: bool = True) -> list[str]:
        cfg = self.config
        argv = [
            "qemu-system-x86_64",
            "-accel",
            accel,
            *_cpu(accel),
            "-m",
            str(cfg.memory_mb),
            "-smp",
            str(cfg.cpus),
            "-display",
            "none",
            "-monitor",
            "none",
            "-no-reboot",
            "-kernel",
            str(self.kernel_image),
            "-initrd",
            str(initrd),
            "-virtfs",
            f"local,path=/,mount_tag=hostroot,{_VIRTFS},readonly=on",
            "-virtfs",
            f"local,path={self.share},mount_tag=share,{_VIRTFS}",
            "-append",
            "console=ttyS0 quiet panic=-1",
        ]
        if cfg.forward_ports:
            forwards = ",".join(
                f"hostfwd=tcp:127.0.0.1:{host}-:{guest}" for guest, host in self._ports.items()
            )
            argv += [
                "-netdev",
                f"user,id=n0,restrict=on,{forwards}",
                "-device",
                "virtio-net-pci,netdev=n0",
            ]
        for index, fd in enumerate(cfg.tap_fds if with_taps else ()):
            argv += [
                "-netdev",
                f"tap,id=t{index},fd={fd}",
                "-device",
                f"virtio-net-pci,netdev=t{index},mac={tap_mac(index)}",
            ]
        if not cfg.forward_ports and not (cfg.tap_fds and with_taps):
            argv += ["-nic", "none"]
        return argv

    def _launch(
        self, initrd: Path, accel: str, log: Path, with_taps: bool = True
    ) -> subprocess.Popen[bytes]:
        self._ports = {guest: _free_port() for guest in self.config.forward_ports}
        argv = self._qemu_argv(initrd, accel, with_taps)
        argv += ["-serial", f"file:{log}"]
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=self.config.tap_fds if with_taps else (),
        )

    @property
    def pid(self) -> int | None:
        """qemu's process id while the VM runs."""
        return self._proc.pid if self._proc is not None else None

    def _pick_accel(self, initrd: Path, cache: Path) -> str:
        wanted = os.environ.get("GAMEDAY_VM_ACCEL", self.config.accel)
        if wanted in ("tcg", "kvm"):
            return wanted
        return "kvm" if kvm_works(self, initrd, cache) else "tcg"

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.config.boot_timeout
        while not (self.share / "ready.json").exists():
            self.check_alive()
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"VM not ready after {self.config.boot_timeout:.0f} s ({self.accel}); "
                    f"console:\n{self.console_tail()}"
                )
            time.sleep(0.2)

    def console_tail(self, lines: int = 40) -> str:
        """The end of the guest's serial console."""
        return "\n".join(_read(self.console_log).splitlines()[-lines:])

    def check_alive(self) -> None:
        """Raise SandboxError (with the console) if qemu has exited."""
        if self._proc is None or self._proc.poll() is not None:
            err = b""
            if self._proc is not None and self._proc.stderr is not None:
                err = self._proc.stderr.read() or b""
            raise SandboxError(
                f"the VM is not running (qemu: {err.decode(errors='replace').strip()!r}); "
                f"console:\n{self.console_tail()}"
            )

    def host_port(self, guest_port: int) -> int:
        """The 127.0.0.1 port on the host that forwards to ``guest_port``."""
        return self._ports[guest_port]

    def spawn(
        self,
        argv: list[str],
        *,
        timeout: float = 600.0,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> GuestProcess:
        """Start ``argv`` in the guest (capped at ``timeout`` seconds there) and return at once."""
        self.check_alive()
        cid = uuid.uuid4().hex[:12]
        request: dict[str, Any] = {"argv": argv, "env": env or {}, "cwd": cwd, "timeout": timeout}
        tmp = self.share / f".{cid}.json"
        tmp.write_text(json.dumps(request))
        os.replace(tmp, self.share / "req" / f"{cid}.json")
        return GuestProcess(self, cid, tuple(argv))

    def run(
        self,
        argv: list[str],
        *,
        timeout: float = 300.0,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> CommandResult:
        """Run ``argv`` in the guest and wait for it (killed there after ``timeout``)."""
        return self.spawn(argv, timeout=timeout, env=env, cwd=cwd).wait(timeout + 30)

    def stop(self, timeout: float = 30.0) -> None:
        """Power the guest off (idempotent); kill qemu if it does not stop in time."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None and self.share.exists():
            (self.share / "req" / "shutdown").write_text("")
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


def _host_tmp_dirs(*paths: Path) -> list[Path]:
    """The top-level folders under /tmp (``/tmp/x``) that ``paths`` live in."""
    tops: list[Path] = []
    for path in paths:
        parts = path.absolute().parts
        if len(parts) > 2 and parts[1] == "tmp" and Path("/tmp", parts[2]) not in tops:  # noqa: S108
            tops.append(Path("/tmp", parts[2]))  # noqa: S108 - the host's /tmp, read-only
    return tops


def _cpu(accel: str) -> list[str]:
    """Under emulation, every CPU feature TCG has: qemu64 lacks SSE4/AVX that wheels
    (hdrhistogram, numpy...) use without checking, and they die with SIGILL."""
    return ["-cpu", "max"] if accel == "tcg" else []


def tap_mac(index: int) -> str:
    """The MAC address of the guest NIC on ``tap_fds[index]`` (locally administered)."""
    return f"52:54:00:9a:00:{index + 1:02x}"


def _free_port() -> int:
    import socket  # noqa: PLC0415 - only for forwarded ports

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def kvm_works(vm: VirtualMachine, initrd: Path, cache: Path, timeout: float = 20.0) -> bool:
    """Probe once (cached per kernel and host) whether a KVM guest gets to its init."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    image = "elf" if vm.kernel_image.name.startswith("vmlinux") else "bz"
    key = f"{vm.kernel_release}-{os.uname().release}-{image}"
    probe_file = cache / f"kvm-probe-{key}.json"
    if probe_file.exists():
        return bool(json.loads(probe_file.read_text())["works"])
    log = cache / f"kvm-probe-{key}.log"
    log.unlink(missing_ok=True)
    proc = vm._launch(initrd, "kvm", log, with_taps=False)
    works = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if BOOT_MARKER in _read(log):
            works = True
            break
        time.sleep(0.2)
    proc.kill()
    proc.wait(timeout=10)
    if proc.stderr is not None:
        proc.stderr.close()
    (vm.share / "ready.json").unlink(missing_ok=True)
    probe_file.write_text(json.dumps({"works": works}))
    return works
