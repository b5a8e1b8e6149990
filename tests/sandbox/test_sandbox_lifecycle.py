"""`gameday sandbox up|status|down` with real services in real namespaces."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.harness import netns_list
from support.sandbox import sandbox_cli

from chaos_ext._core import helper as _helper
from chaos_ext._core import procfs as _procfs

ROOT = Path(__file__).resolve().parents[2]


def _in(ns: str, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


GET = (
    "import sys,urllib.request,urllib.error\n"
    "try:\n r=urllib.request.urlopen(sys.argv[1],timeout=5); print(r.status, r.read().decode())\n"
    "except urllib.error.HTTPError as e: print(e.code, e.read().decode())\n"
)


def test_status_shows_every_service_running_and_answering(sandbox: tuple[str, Path]) -> None:
    prefix, state = sandbox
    result = sandbox_cli(prefix, state, "status", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["up"] and report["backend"] == "netns" and report["app_mode"] == "fragile"
    assert set(report["services"]) == {
        "postgres",
        "dnsmasq",
        "app",
        "exporter",
        "prometheus",
        "traffic",
    }
    for name, svc in report["services"].items():
        assert svc["running"], (name, svc)
        assert svc["answering"] is (None if name == "traffic" else True), (name, svc)
    assert {f"{prefix}-{role}" for role in ("core", "app", "db", "dns", "mon")} <= netns_list()


def test_app_resolves_the_db_over_dns_and_queries_it(sandbox: tuple[str, Path]) -> None:
    prefix, _ = sandbox
    mon = f"{prefix}-mon"
    work = _in(mon, GET, "http://10.77.0.10:8080/")
    assert work.stdout.startswith("200 ok"), work.stdout + work.stderr
    assert _in(mon, GET, "http://10.77.0.10:8080/readiness").stdout.startswith("200 ready")
    metrics = _in(mon, GET, "http://10.77.0.10:8080/metrics").stdout
    assert 'http_requests_total{code="200",handler="/"}' in metrics
    assert "app_dns_lookup_duration_seconds_count" in metrics


def test_prometheus_scrapes_the_app_and_the_exporter(sandbox: tuple[str, Path]) -> None:
    prefix, _ = sandbox
    query = (
        "import json,sys,urllib.request,urllib.parse\n"
        "u='http://10.77.0.40:9090/api/v1/query?query='+urllib.parse.quote(sys.argv[1])\n"
        "print(json.dumps(json.load(urllib.request.urlopen(u,timeout=5))['data']['result']))\n"
    )
    deadline = time.monotonic() + 30
    while True:
        up = json.loads(_in(f"{prefix}-mon", query, "up").stdout or "[]")
        jobs = {r["metric"]["job"]: r["value"][1] for r in up}
        if jobs.get("app") == "1" and jobs.get("sandbox") == "1":
            break
        assert time.monotonic() < deadline, jobs
        time.sleep(1)
    procs = json.loads(
        _in(f"{prefix}-mon", query, 'container_processes{container="dnsmasq"}').stdout
    )
    assert float(procs[0]["value"][1]) >= 1
    conns = json.loads(_in(f"{prefix}-mon", query, "pg_settings_max_connections").stdout)
    assert float(conns[0]["value"][1]) == 40


def test_run_refuses_a_broken_sandbox_then_down_removes_everything(tmp_path: Path) -> None:
    prefix = "d" + str(int(time.time() * 1000))[-5:]
    assert sandbox_cli(prefix, tmp_path, "up", "--backend", "netns").returncode == 0
    # the background traffic gone (as after its 1 h cap): a run would judge an idle app
    status = json.loads(sandbox_cli(prefix, tmp_path, "status", "--json").stdout)
    os.kill(int(status["services"]["traffic"]["pid"]), signal.SIGTERM)
    deadline = time.monotonic() + 10
    while _procfs.alive(int(status["services"]["traffic"]["pid"])):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    experiment = str(ROOT / "experiments" / "sandbox" / "02-dns-saturation.json")
    refused = sandbox_cli(prefix, tmp_path, "run", "--journal-dir", str(tmp_path / "j"), experiment)
    assert refused.returncode == 2, refused.stderr
    assert "nothing was run: not running: traffic (pid" in refused.stderr
    assert not (tmp_path / "j").exists() or not list((tmp_path / "j").iterdir())
    first = sandbox_cli(prefix, tmp_path, "down")
    assert first.returncode == 0, first.stderr
    assert "removed namespaces" in first.stderr
    assert not [n for n in netns_list() if n.startswith(f"{prefix}-")]
    assert _helper.find_helpers(f"sandbox-{prefix}") == []
    assert not (tmp_path / "sandbox" / prefix).exists()
    again = sandbox_cli(prefix, tmp_path, "down")
    assert again.returncode == 0
    assert "was not running" in again.stderr
    status = sandbox_cli(prefix, tmp_path, "status")
    assert status.returncode == 2
