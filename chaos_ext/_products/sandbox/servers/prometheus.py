"""A throwaway real Prometheus (Debian's ``/usr/bin/prometheus``).

Own data directory, own port, a generated configuration with the given scrape
targets and a short scrape interval; optionally inside a network namespace
(``netns=["ip", "netns", "exec", "<ns>"]``) and behind basic auth
(``--web.config.file`` with a bcrypt hash). Used by the tests and by the local
sandbox::

    with prometheus.start(targets=["127.0.0.1:9187"], scrape_interval="1s") as prom:
        print(prom.url)    # http://127.0.0.1:<port>

Readiness is the server's own log line "Server is ready to receive web
requests" (works inside a namespace), confirmed by ``GET /-/ready`` when the
address is reachable from here.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from chaos_ext._products.sandbox.errors import SandboxError
from chaos_ext._products.sandbox.servers._stoppable import Stoppable

__all__ = ["BINARY", "PrometheusServer", "free_port", "start"]

BINARY = "/usr/bin/prometheus"
_READY_LINE = "Server is ready to receive web requests"


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (bind to port 0 and release it)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class PrometheusServer(Stoppable):
    """A running Prometheus; ``stop()`` is idempotent and removes its data dir."""

    host: str
    port: int
    workdir: Path
    process: subprocess.Popen[bytes]
    scrape_interval: str
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    tls: bool = False
    _owns_workdir: bool = True
    rule_files: tuple[Path, ...] = ()
    honor_labels: tuple[str, ...] = ()  # jobs whose pushed labels are kept (a Pushgateway)
    alertmanagers: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def _open(self, path: str, timeout: float) -> Any:
        request = urllib.request.Request(self.url + path)  # noqa: S310 - our own server
        if self.basic_auth:
            token = base64.b64encode(":".join(self.basic_auth).encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        context = None
        if self.tls:  # our own throwaway server with a self-signed certificate
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return urllib.request.urlopen(request, timeout=timeout, context=context)  # noqa: S310

    @property
    def config_path(self) -> Path:
        return self.workdir / "prometheus.yml"

    @property
    def log_path(self) -> Path:
        return self.workdir / "prometheus.log"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def set_targets(self, jobs: Mapping[str, Sequence[str]]) -> None:
        """Rewrite the scrape jobs and make the server reload them (SIGHUP)."""
        _write_config(self.config_path, jobs, self.scrape_interval, self._extra())
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGHUP)

    def _extra(self) -> dict[str, Any]:
        return {
            "rule_files": self.rule_files,
            "honor_labels": self.honor_labels,
            "alertmanagers": self.alertmanagers,
        }

    def wait_scraped(self, timeout: float = 20.0) -> None:
        """Wait until every configured target has been scraped successfully.

        Prometheus hands static targets to its scrapers on a 5 s tick, so the
        first sample lands ~5 s after start.
        """
        deadline = time.monotonic() + timeout
        health: list[str] = []
        while time.monotonic() < deadline:
            health = [t.get("health", "") for t in self._api("/api/v1/targets")["activeTargets"]]
            if health and all(h == "up" for h in health):
                return
            time.sleep(0.2)
        raise SandboxError(f"targets not all up after {timeout:g} s: {health}")

    def _api(self, path: str) -> dict[str, Any]:
        try:
            with self._open(path, timeout=5) as answer:
                data: dict[str, Any] = json.load(answer)["data"]
        except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
            raise SandboxError(f"prometheus {self.url}{path}: {exc}") from exc
        return data

    def kill(self) -> None:
        """SIGKILL the server (a crash, for tests); ``stop()`` still cleans up."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
            except ProcessLookupError:
                pass
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _write_config(
    path: Path, jobs: Mapping[str, Sequence[str]], interval: str, extra: Mapping[str, Any]
) -> None:
    honor = set(extra.get("honor_labels") or ())
    config: dict[str, Any] = {
        "global": {
            "scrape_interval": interval,
            "scrape_timeout": interval,
            "evaluation_interval": interval,
        },
        "scrape_configs": [
            {
                "job_name": job,
                "static_configs": [{"targets": list(targets)}],
                **({"honor_labels": True} if job in honor else {}),
            }
            for job, targets in jobs.items()
        ],
    }
    if extra.get("rule_files"):
        config["rule_files"] = [str(p) for p in extra["rule_files"]]
    if extra.get("alertmanagers"):
        targets = list(extra["alertmanagers"])
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": targets}]}]}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(config, sort_keys=False))
    tmp.replace(path)


def _write_web_config(
    path: Path, basic_auth: tuple[str, str] | None, tls: tuple[Path, Path] | None
) -> None:
    config: dict[str, Any] = {}
    if basic_auth:
        import bcrypt  # noqa: PLC0415 - the sandbox extra: `gameday sandbox` says when it lacks it

        user, password = basic_auth
        hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
        config["basic_auth_users"] = {user: hashed}
    if tls:
        config["tls_server_config"] = {"cert_file": str(tls[0]), "key_file": str(tls[1])}
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)


def _http_ready(server: PrometheusServer) -> bool:
    try:
        with server._open("/-/ready", timeout=2) as answer:
            return int(answer.status) == 200
    except (urllib.error.URLError, OSError):
        return False


def _wait_ready(server: PrometheusServer, timeout: float, check_http: bool) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise SandboxError(
                f"prometheus exited with {server.process.returncode}: {server.log()[-800:]}"
            )
        if _READY_LINE in server.log() and (not check_http or _http_ready(server)):
            return
        time.sleep(0.1)
    raise SandboxError(f"prometheus not ready after {timeout:g} s: {server.log()[-800:]}")


def start(
    *,
    targets: Sequence[str] = (),
    jobs: Mapping[str, Sequence[str]] | None = None,
    scrape_interval: str = "1s",
    host: str = "127.0.0.1",
    port: int = 0,
    netns: Sequence[str] = (),
    basic_auth: tuple[str, str] | None = None,
    tls: tuple[Path, Path] | None = None,
    workdir: Path | None = None,
    ready_timeout: float = 60.0,
    rule_files: Sequence[Path] = (),
    honor_labels: Sequence[str] = (),
    alertmanagers: Sequence[str] = (),
) -> PrometheusServer:
    """Start Prometheus scraping ``targets`` (job ``gameday``) and/or ``jobs``; wait ready.

    ``basic_auth=(user, password)`` and ``tls=(cert_file, key_file)`` go to
    ``--web.config.file``. ``rule_files`` are evaluated every scrape interval;
    ``honor_labels`` names jobs that keep their targets' labels (a Pushgateway);
    ``alertmanagers`` are ``host:port`` targets to send alerts to. ``port=0``
    picks a free port. ``netns`` is a command prefix that runs the
    server inside a network namespace (then ``host`` must be an address in it).
    """
    if not Path(BINARY).exists():
        raise SandboxError(f"{BINARY} is missing: apt-get install prometheus")
    owns = workdir is None
    work = Path(tempfile.mkdtemp(prefix="gameday-prom-")) if workdir is None else workdir
    work.mkdir(parents=True, exist_ok=True)
    all_jobs = {**({"gameday": list(targets)} if targets else {}), **(jobs or {})}
    extra = {
        "rule_files": tuple(rule_files),
        "honor_labels": tuple(honor_labels),
        "alertmanagers": tuple(alertmanagers),
    }
    _write_config(work / "prometheus.yml", all_jobs, scrape_interval, extra)
    port = port or free_port(host if not netns else "127.0.0.1")
    argv = [
        *netns,
        BINARY,
        f"--config.file={work / 'prometheus.yml'}",
        f"--storage.tsdb.path={work / 'data'}",
        f"--web.listen-address={host}:{port}",
        "--storage.tsdb.retention.time=2h",
        "--log.level=info",
    ]
    if basic_auth or tls:
        _write_web_config(work / "web.yml", basic_auth, tls)
        argv.append(f"--web.config.file={work / 'web.yml'}")
    with (work / "prometheus.log").open("wb") as log:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=work,
        )
    server = PrometheusServer(
        host,
        port,
        work,
        process,
        scrape_interval,
        basic_auth,
        tls is not None,
        owns,
        tuple(rule_files),
        tuple(honor_labels),
        tuple(alertmanagers),
    )
    try:
        _wait_ready(server, ready_timeout, check_http=not netns)
    except BaseException:
        server.stop()
        raise
    return server
