"""Start and stop the sandbox's real services inside its namespaces.

Every process started here carries ``GAMEDAY_HELPER_TOKEN=sandbox-<prefix>``
in its environment (set for it by ``env`` in its command, :func:`_netns`; the
runner's own environment is never changed), so :func:`stop_all` finds them all
through /proc even when the state file is gone.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from chaos_ext._core import helper as _helper
from chaos_ext._products.sandbox import _nodelocal, _nsexec
from chaos_ext._products.sandbox._state import SandboxState
from chaos_ext._products.sandbox._topology import Topology
from chaos_ext._products.sandbox.errors import SandboxError
from chaos_ext._products.sandbox.servers import dnsmasq, postgres, prometheus

__all__ = [
    "DB_NAME",
    "PORTS",
    "reachable",
    "start_all",
    "stop_all",
    "token",
    "wait_healthy",
]

DB_NAME = "db.sandbox.test"


READY_TIMEOUT = 60.0
"""For each service to answer; they start in 1-6 s here, also with a CPU hog on one core."""
TRAFFIC_RATE = 10.0
"""Background requests per second: 100 per 10 s window, enough for a p95 (the 5th slowest),
light enough for 2 busy cores (see docs/sandbox.md, "Where the time and the noise went")."""
HEARTBEAT = 5.0


_HEALTH = {
    "ok": 'sum(rate(http_requests_total{job="app", code="200"}[15s]))',
    "errors": 'sum(rate(http_requests_total{job="app", code=~"5.."}[15s])) or vector(0)',
    # seconds of history: the DB latency hypothesis compares with 60 s..15 s ago
    "history": 'count_over_time(up{job="app"}[60s])',
}
HISTORY_S = 30


def _prometheus_value(url: str, expr: str) -> float | None:
    query = urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=5) as answer:  # noqa: S310
            result = json.load(answer)["data"]["result"]
    except (OSError, ValueError, KeyError):
        return None
    return float(result[0]["value"][1]) if result else None


def wait_healthy(mon_netns: str, prometheus_url: str, say: Progress) -> bool:
    """Wait until Prometheus has 30 s of history and 15 s of answered traffic without 5xx."""
    say("waiting for a healthy baseline: 15 s of traffic without errors, seen by Prometheus")
    started = time.monotonic()
    last_said = started
    values: dict[str, float | None] = {}

    def probe() -> bool:
        values.update({k: _prometheus_value(prometheus_url, e) for k, e in _HEALTH.items()})
        return True

    while time.monotonic() - started < READY_TIMEOUT:
        values.clear()
        _nsexec.in_netns(mon_netns, probe, timeout=30)
        history = values.get("history") or 0
        if (values.get("ok") or 0) > 0 and values.get("errors") == 0 and history >= HISTORY_S:
            return True
        if time.monotonic() - last_said >= HEARTBEAT:
            ok, errors = values.get("ok") or 0, values.get("errors") or 0
            waited = time.monotonic() - started
            say(
                f"  {ok:.1f} req/s answered, {errors:.1f} errors/s, {history:.0f} s of history "
                f"({waited:.0f} s)"
            )
            last_said = time.monotonic()
        time.sleep(1)
    say("warning: the app did not reach a clean baseline in time; verdicts may suffer")
    return False


PORTS = {
    "postgres": 5432,
    "dns": 53,
    "app": 8080,
    "app_metrics": 8081,
    "exporter": 9187,
    "prometheus": 9090,
}
Progress = Callable[[str], None]


def token(prefix: str) -> str:
    return f"sandbox-{prefix}"


def _tagged(prefix: str) -> list[str]:
    """The command prefix that tags what it runs as the sandbox's (``env TOKEN=...``)."""
    return ["env", f"{_helper.TOKEN_VAR}={token(prefix)}"]


def _netns(ns: str, prefix: str) -> list[str]:
    """Run in namespace ``ns``, tagged as sandbox ``prefix``'s."""
    return ["ip", "netns", "exec", ns, *_tagged(prefix)]


def _spawn(ns: str, prefix: str, argv: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as handle:
        return subprocess.Popen(
            [*_netns(ns, prefix), *argv],
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _wait_http(ns: str, url: str, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _nsexec.in_netns(ns, _nsexec.http_ok(url), timeout=10):
            return
        time.sleep(0.3)
    tail = log.read_text(errors="replace")[-400:] if log.exists() else ""
    raise SandboxError(f"{what} did not answer {url} within {timeout:g} s: {tail}")


def _python_service(
    topo: Topology, role: str, module: str, args: list[str], work: Path, health: str
) -> dict[str, Any]:
    host = topo.host(role)
    log = work / f"{module.rsplit('.', 1)[-1].lstrip('_')}.log"
    proc = _spawn(host.netns, topo.prefix, [sys.executable, "-m", module, *args], log)
    _wait_http(host.netns, health, READY_TIMEOUT, module, log)
    return {"pid": proc.pid, "netns": host.netns, "log": str(log)}


def start_all(
    topo: Topology, app_mode: str, work: Path, say: Progress, backend: str = "netns"
) -> SandboxState:
    """Start PostgreSQL, dnsmasq, the app, the exporter and Prometheus; record them."""
    state = SandboxState(topo.prefix, backend, app_mode, time.time(), dirs=[str(work)])
    password_file = work / "db-password"
    password_file.write_text(secrets.token_urlsafe(18))
    password_file.chmod(0o600)
    db, dns, app, mon = (topo.host(r) for r in ("db", "dns", "app", "mon"))

    say(f"PostgreSQL in {db.netns} ({db.address}:{PORTS['postgres']}, max_connections 40)")
    pg = postgres.start(
        password=password_file.read_text(),
        user="app",
        database="app",
        max_connections=40,
        host=db.address,
        port=PORTS["postgres"],
        netns=_netns(db.netns, topo.prefix),
        ready_timeout=READY_TIMEOUT,
    )
    state.services["postgres"] = {
        "pid": pg.process.pid,
        "netns": db.netns,
        "address": db.address,
        "port": pg.port,
        "dir": str(pg.base_dir),
    }
    state.dirs.append(str(pg.base_dir))

    say(f"dnsmasq in {dns.netns} ({dns.address}:53) serving {DB_NAME}")
    dm = dnsmasq.start(
        records={DB_NAME: db.address},
        local_domains=["sandbox.test"],
        address=dns.address,
        port=PORTS["dns"],
        prefix=_netns(dns.netns, topo.prefix),
        workdir=work / "dnsmasq",
        ready_timeout=READY_TIMEOUT,
    )
    state.services["dnsmasq"] = {
        "pid": dm.pid,
        "netns": dns.netns,
        "address": dns.address,
        "port": dm.port,
        "pidfile": str(dm.pidfile),
    }

    resolv, cache = _nodelocal.prepare(
        app.netns, app_mode, dns.address, work, READY_TIMEOUT, tag=_tagged(topo.prefix)
    )
    if cache is not None:
        say(f"node-local DNS cache in {app.netns} ({_nodelocal.NODELOCAL_ADDRESS}:53)")
        state.services["nodelocal-dns"] = cache
    say(f"demo app in {app.netns} ({app.address}:8080, {app_mode})")
    app_args = [
        "--resolv-conf",
        str(resolv),
        "--listen",
        f"0.0.0.0:{PORTS['app']}",
        "--metrics-port",
        str(PORTS["app_metrics"]),
        "--db-host",
        DB_NAME,
        "--db-port",
        str(PORTS["postgres"]),
        "--db-password-file",
        str(password_file),
        "--dns-server",
        dns.address,
        "--dns-port",
        str(PORTS["dns"]),
        *(["--tuned"] if app_mode == "tuned" else []),
    ]
    state.services["app"] = {
        **_python_service(
            topo,
            "app",
            "chaos_ext._products.sandbox._app",
            app_args,
            work,
            f"http://127.0.0.1:{PORTS['app']}/healthz",
        ),
        "address": app.address,
        "port": PORTS["app"],
    }

    say(f"exporter in {mon.netns} ({mon.address}:{PORTS['exporter']})")
    exp_args = [
        "--listen",
        f"0.0.0.0:{PORTS['exporter']}",
        "--dnsmasq-pidfile",
        str(dm.pidfile),
        "--db-host",
        db.address,
        "--db-port",
        str(PORTS["postgres"]),
        "--db-password-file",
        str(password_file),
        "--limit-netns",
        app.netns,
    ]
    state.services["exporter"] = {
        **_python_service(
            topo,
            "mon",
            "chaos_ext._products.sandbox._exporter",
            exp_args,
            work,
            f"http://127.0.0.1:{PORTS['exporter']}/metrics",
        ),
        "address": mon.address,
        "port": PORTS["exporter"],
    }

    say(f"Prometheus in {mon.netns} ({mon.address}:{PORTS['prometheus']}, scrape every 1 s)")
    prom = prometheus.start(
        jobs={
            "app": [f"{app.address}:{PORTS['app_metrics']}"],
            "sandbox": [f"{mon.address}:{PORTS['exporter']}"],
        },
        scrape_interval="1s",
        host=mon.address,
        port=PORTS["prometheus"],
        netns=_netns(mon.netns, topo.prefix),
        workdir=work / "prometheus",
        ready_timeout=READY_TIMEOUT,
    )
    rate = TRAFFIC_RATE
    say(f"background traffic from {mon.netns}: {rate:g} req/s to the app for at most 1 h")
    traffic = subprocess.run(
        [
            *_netns(mon.netns, topo.prefix),
            sys.executable,
            "-m",
            "chaos_ext._products.sandbox._traffic",
            "--url",
            f"http://{app.address}:{PORTS['app']}/",
            "--rate",
            str(rate),
            "--duration",
            "3600",
            "--results",
            str(work / "traffic"),
            "--token",
            token(topo.prefix),
        ],
        capture_output=True,
        text=True,
        timeout=READY_TIMEOUT,
        check=False,
    )
    if traffic.returncode != 0:
        raise SandboxError(f"background traffic did not start: {traffic.stderr.strip()[-400:]}")
    state.services["traffic"] = {**json.loads(traffic.stdout), "netns": mon.netns}
    state.services["prometheus"] = {
        "pid": prom.process.pid,
        "netns": mon.netns,
        "address": mon.address,
        "port": prom.port,
        "url": f"http://{mon.address}:{prom.port}",
    }
    return state


def stop_all(prefix: str, dirs: Sequence[str] = ()) -> int:
    """Stop every process of the sandbox and remove its data. Idempotent."""
    stopped = _helper.stop_helpers(token(prefix), grace=10.0)
    for directory in dirs:
        shutil.rmtree(directory, ignore_errors=True)
    return stopped


def reachable(ns: str, address: str, port: int) -> bool:
    """Whether ``address:port`` accepts TCP from inside namespace ``ns``."""
    return _nsexec.in_netns(ns, _nsexec.tcp_open(address, port), timeout=10)
