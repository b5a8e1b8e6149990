"""Throwaway Debian Alertmanager and Pushgateway (test-only): own port, own data dir.

    with monitoring.start_alertmanager() as am:      # am.url, am.post_alert(...)
    with monitoring.start_pushgateway() as pg:       # pg.url, pg.target ("127.0.0.1:port")

Alertmanager runs without clustering (``--cluster.listen-address=``) and with a
null receiver; readiness is ``GET /-/ready``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from chaos_ext._products.sandbox.servers._stoppable import Stoppable
from chaos_ext._products.sandbox.servers.prometheus import free_port

ALERTMANAGER = "/usr/bin/prometheus-alertmanager"
PUSHGATEWAY = "/usr/bin/prometheus-pushgateway"


@dataclass
class Daemon(Stoppable):
    """A running server process with its work directory."""

    port: int
    workdir: Path
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        try:
            return (self.workdir / "server.log").read_text(errors="replace")
        except OSError:
            return ""

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)  # noqa: S310
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310 - our own server
            raw = answer.read()
        return json.loads(raw) if raw.strip() else None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.workdir, ignore_errors=True)


class Alertmanager(Daemon):
    def post_alert(
        self,
        labels: Mapping[str, str],
        minutes: float = 10,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """Raise an alert through the API v2, as Prometheus would send it."""
        now = datetime.now(UTC)
        alert = {
            "labels": dict(labels),
            "annotations": dict(annotations or {}),
            "startsAt": now.isoformat(),
            "endsAt": (now + timedelta(minutes=minutes)).isoformat(),
        }
        self.request("POST", "/api/v2/alerts", [alert])

    def alerts(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.request("GET", "/api/v2/alerts")
        return found


def _start(argv: list[str], work: Path, port: int, kind: type[Daemon]) -> Any:
    with (work / "server.log").open("wb") as log:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=work
        )
    daemon = kind(port, work, process)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            daemon.stop()
            raise RuntimeError(f"{argv[0]} exited: {daemon.log()[-800:]}")
        try:
            with urllib.request.urlopen(f"{daemon.url}/-/ready", timeout=2) as answer:  # noqa: S310
                if answer.status == 200:
                    return daemon
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    daemon.stop()
    raise RuntimeError(f"{argv[0]} not ready after 60 s: {daemon.log()[-800:]}")


def start_alertmanager() -> Alertmanager:
    work = Path(tempfile.mkdtemp(prefix="gameday-am-"))
    (work / "alertmanager.yml").write_text(
        "route:\n  receiver: 'null'\n  group_wait: 0s\nreceivers:\n  - name: 'null'\n"
    )
    port = free_port()
    argv = [
        ALERTMANAGER,
        f"--config.file={work / 'alertmanager.yml'}",
        f"--storage.path={work / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
        "--log.level=info",
    ]
    server: Alertmanager = _start(argv, work, port, Alertmanager)
    return server


def start_pushgateway() -> Daemon:
    work = Path(tempfile.mkdtemp(prefix="gameday-pg-"))
    port = free_port()
    argv = [
        PUSHGATEWAY,
        f"--web.listen-address=127.0.0.1:{port}",
        "--persistence.file=",
        "--web.enable-admin-api",
        "--log.level=info",
    ]
    server: Daemon = _start(argv, work, port, Daemon)
    return server
