"""A throwaway OpenSSH server (Debian's sshd) with generated host and client keys.

::

    with start(workdir=tmp, netns_prefix=["ip", "netns", "exec", ns]) as server:
        server.port, server.known_hosts, server.client_key   # connect as root with the key

Everything lives in ``workdir`` (config, keys, known_hosts, pid file). With a
``netns_prefix`` sshd runs in that network namespace, so what its sessions do
to the network (``tc``, ``ip``) stays there. Only key authentication, for the
user running it (root), on one address.
"""

from __future__ import annotations

import random
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from chaos_ext._products.sandbox.errors import SandboxError
from chaos_ext._products.sandbox.servers._stoppable import Stoppable

__all__ = ["SshdServer", "start"]

SSHD = "/usr/sbin/sshd"


@dataclass
class SshdServer(Stoppable):
    """A running sshd. ``stop()`` is idempotent."""

    host: str
    port: int
    workdir: Path
    known_hosts: Path
    client_key: Path
    host_public_key: str
    proc: subprocess.Popen[bytes] = field(repr=False)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def _keygen(path: Path) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        timeout=30,
        capture_output=True,
    )
    return path.with_suffix(".pub").read_text().strip()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(
    *,
    workdir: Path,
    host: str = "127.0.0.1",
    port: int | None = None,
    netns_prefix: list[str] | None = None,
    ready_timeout: float = 20.0,
    path: str = "",
) -> SshdServer:
    """Start sshd; in a namespace of our own, a random high port is free by construction.

    ``path``: the sessions' PATH (a folder of the test's own first, e.g. a stand-in
    for a node tool this machine lacks); default: sshd's own.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    host_key = workdir / "ssh_host_ed25519_key"
    client_key = workdir / "client_ed25519"
    host_pub = _keygen(host_key)
    (workdir / "authorized_keys").write_text(_keygen(client_key) + "\n")
    if port is None:
        port = random.randint(20000, 60000) if netns_prefix else _free_port()
    pid_file = workdir / "sshd.pid"
    config = workdir / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                f"ListenAddress {host}",
                f"HostKey {host_key}",
                f"PidFile {pid_file}",
                f"AuthorizedKeysFile {workdir}/authorized_keys",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                "LogLevel ERROR",
                "MaxStartups 50",
                # sessions do not read the real user's dotfiles (a slow ~/.bashrc costs seconds)
                f"SetEnv HOME={workdir}" + (f" PATH={path}" if path else ""),
                "",
            ]
        )
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation directory sshd requires
    known_hosts = workdir / "known_hosts"
    known_hosts.write_text(f"[{host}]:{port} {' '.join(host_pub.split()[:2])}\n")
    proc = subprocess.Popen(
        [*(netns_prefix or []), SSHD, "-D", "-e", "-f", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=(workdir / "sshd.log").open("wb"),
        start_new_session=True,
    )
    server = SshdServer(host, port, workdir, known_hosts, client_key, host_pub, proc)
    deadline = time.monotonic() + ready_timeout
    while not pid_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            server.stop()
            log = (workdir / "sshd.log").read_text(errors="replace")[-500:]
            raise SandboxError(f"sshd did not start on {host}:{port}: {log}")
        time.sleep(0.05)
    return server
