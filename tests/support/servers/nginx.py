"""A throwaway nginx (Debian package) serving a small static file, HTTP/1.1 or h2c.

Fast enough not to be the bottleneck of a load benchmark; ``http2=True``
listens with HTTP/2 prior knowledge (h2c) on plain TCP, or with ALPN when
``tls=True`` (a self-signed certificate for 127.0.0.1 made with the openssl
CLI; its path is the handle's ``ca_file``). Own config, pid file
and temp dirs under a private directory; a free port picked at start (nginx
cannot report a port it chose, so one is reserved by binding port 0 first,
and the start is retried if another process took it meanwhile).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from chaos_ext._products.sandbox.servers._stoppable import Stoppable

__all__ = ["Nginx", "start"]

_CONF = """\
worker_processes {workers};
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  keepalive_requests 10000000;
  keepalive_timeout 300s;
  http2_max_requests 10000000;
  server {{
    listen 127.0.0.1:{port}{tls}{http2};
    {certificates}
    root {dir}/www;
    location = /status {{ return 204; }}
  }}
}}
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Nginx(Stoppable):
    """A running nginx: ``url`` of its static file, ``port``, ``stop()``."""

    port: int
    directory: Path
    proc: subprocess.Popen[bytes] = field(repr=False)
    tls: bool = False

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}/index.html"

    @property
    def ca_file(self) -> Path:
        """The self-signed certificate (``tls=True``), to trust it as a CA."""
        return self.directory / "cert.pem"

    def stop(self) -> None:
        _end(self.proc)
        shutil.rmtree(self.directory, ignore_errors=True)


def _end(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _self_signed(directory: Path) -> str:
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(directory / "key.pem"),
            "-out",
            str(directory / "cert.pem"),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    (directory / "key.pem").chmod(0o644)  # read by the www-data workers; a throwaway key
    return f"ssl_certificate {directory}/cert.pem; ssl_certificate_key {directory}/key.pem;"


def _launch(directory: Path, port: int, prefix: Sequence[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*prefix, "nginx", "-c", str(directory / "nginx.conf"), "-p", str(directory)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def start(
    *,
    body: str = "hello from nginx\n",
    http2: bool = False,
    tls: bool = False,
    workers: int = 1,
    prefix: Sequence[str] = (),
    ready_timeout: float = 10.0,
) -> Nginx:
    """Start nginx on a free loopback port; raise RuntimeError if it does not listen."""
    directory = Path(tempfile.mkdtemp(prefix="gameday-nginx-"))
    directory.chmod(0o755)  # nginx workers run as www-data when started by root
    (directory / "www").mkdir()
    (directory / "www" / "index.html").write_text(body)
    certificates = _self_signed(directory) if tls else ""
    for _attempt in range(3):
        port = _free_port()
        conf = _CONF.format(
            workers=workers,
            dir=directory,
            port=port,
            http2=" http2" if http2 else "",
            tls=" ssl" if tls else "",
            certificates=certificates,
        )
        (directory / "nginx.conf").write_text(conf)
        proc = _launch(directory, port, prefix)
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline and proc.poll() is None:
            if _listening(port):
                return Nginx(port=port, directory=directory, proc=proc, tls=tls)
            time.sleep(0.05)
        _end(proc)
    shutil.rmtree(directory, ignore_errors=True)
    raise RuntimeError("nginx did not start (is the Debian package installed?)")
