"""A throwaway real Prometheus Pushgateway (Debian's ``prometheus-pushgateway``).

In memory only (``--persistence.file=""``: never the package's
/var/lib/prometheus file), on its own port::

    with pushgateway.start() as gateway:
        print(gateway.url)    # http://127.0.0.1:<port>

Readiness is ``GET /-/ready`` answering 200.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from chaos_ext._servers._stoppable import Stoppable
from chaos_ext.errors import SandboxError

__all__ = ["BINARY", "PushgatewayServer", "start"]

BINARY = "/usr/bin/prometheus-pushgateway"


@dataclass
class PushgatewayServer(Stoppable):
    """A running Pushgateway; ``stop()`` is idempotent."""

    host: str
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as answer:  # noqa: S310 - ours
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def start(
    *, host: str = "127.0.0.1", port: int | None = None, ready_timeout: float = 30.0
) -> PushgatewayServer:
    """Start the Pushgateway and wait until it is ready (SandboxError otherwise)."""
    chosen = port or _free_port(host)
    argv = [BINARY, f"--web.listen-address={host}:{chosen}", "--persistence.file=",
            "--log.level=warn"]  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server = PushgatewayServer(host, chosen, process)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            error = process.stderr.read().decode(errors="replace") if process.stderr else ""
            raise SandboxError(f"the Pushgateway exited {process.returncode}: {error.strip()}")
        if _ready(server.url):
            if process.stderr is not None:
                process.stderr.close()
            return server
        time.sleep(0.05)
    server.stop()
    raise SandboxError(f"the Pushgateway was not ready on {server.url} within {ready_timeout} s")
