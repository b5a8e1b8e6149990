"""Benchmark: typed catalog probes vs chaostoolkit-prometheus, and abort latency.

1. A steady state of 10 catalog probes evaluated against a real Prometheus
   (Debian's, scraping an in-process exporter every second): our
   ``catalog_probe`` (float results, typed errors) vs chaostoolkit-prometheus's
   ``query`` (raw JSON) running the same 10 instant queries, interleaved
   rounds in the same run; ratio of the median round times.
2. Abort latency: ``gameday run --abort-on`` with a method that waits; the
   benchmark pushes the metric over the line and times the rollback (median of
   a few runs), in seconds and in scrape intervals.

Run: .venv/bin/python benchmarks/prometheus.py
Last line: prometheus probe_time_ratio_vs_ctk=<x> abort_latency_s=<y>
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import logzero
import yaml
from _peers import require
from chaosprometheus.probes import query as ctk_query
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from chaos_ext._products.sandbox.servers import prometheus
from chaos_ext.prometheus._probe_files import default_catalog
from chaos_ext.prometheus.probes import catalog_probe

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 40
ABORT_RUNS = 3
SCRAPE_S = 1.0
PROBES = [
    "http-error-ratio",
    "http-latency-p95",
    "http-latency-p99",
    "dnsmasq-child-processes",
    "coredns-forward-cache-miss-rate",
    "coredns-servfail-ratio",
    "node-local-dns-latency-p99",
    "postgres-connection-headroom",
    "mysql-connection-headroom",
    "envoy-downstream-connections",
]
JOBS = ["api", "coredns", "node-local-dns", "postgres", "mysql", "envoy", "bench"]


def _platform_metrics(registry: CollectorRegistry) -> dict[str, Any]:
    """The metrics the 10 catalog probes read, as a small healthy platform would serve them."""
    requests = Counter("http_requests", "requests", ["code"], registry=registry)
    latency = Histogram(
        "http_request_duration_seconds",
        "latency",
        registry=registry,
        buckets=[0.05, 0.1, 0.25, 0.5, 1.0],
    )
    dns_latency = Histogram(
        "coredns_dns_request_duration_seconds",
        "dns",
        registry=registry,
        buckets=[0.001, 0.005, 0.01, 0.05, 0.1],
    )
    misses = Counter("coredns_forward_conn_cache_misses", "misses", registry=registry)
    responses = Counter("coredns_dns_responses", "responses", ["rcode"], registry=registry)
    gauges = {
        "container_processes": Gauge(
            "container_processes", "p", ["container", "namespace"], registry=registry
        ),
        "pg_stat_activity_count": Gauge("pg_stat_activity_count", "a", registry=registry),
        "pg_settings_max_connections": Gauge("pg_settings_max_connections", "m", registry=registry),
        "mysql_threads": Gauge("mysql_global_status_threads_connected", "t", registry=registry),
        "mysql_max": Gauge("mysql_global_variables_max_connections", "m", registry=registry),
        "envoy_cx": Gauge("envoy_http_downstream_cx_active", "c", registry=registry),
        "bench_breach": Gauge("bench_error_ratio", "pushed over the line", registry=registry),
    }
    gauges["container_processes"].labels(container="dnsmasq", namespace="kube-system").set(4)
    gauges["pg_stat_activity_count"].set(20)
    gauges["pg_settings_max_connections"].set(100)
    gauges["mysql_threads"].set(30)
    gauges["mysql_max"].set(150)
    gauges["envoy_cx"].set(120)
    return {
        "requests": requests,
        "latency": latency,
        "dns_latency": dns_latency,
        "misses": misses,
        "responses": responses,
        **gauges,
    }


def _traffic(metrics: dict[str, Any], seconds: float) -> None:
    """A few seconds of 'traffic' so that rate() and histograms have data."""
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline:
        i += 1
        metrics["requests"].labels(code="500" if i % 50 == 0 else "200").inc()
        metrics["latency"].observe(0.03 + (i % 10) * 0.02)
        metrics["dns_latency"].observe(0.002 + (i % 5) * 0.001)
        metrics["responses"].labels(rcode="NOERROR").inc()
        if i % 20 == 0:
            metrics["misses"].inc()
        time.sleep(0.005)


def _round(func: Any) -> float:
    started = time.perf_counter()
    func()
    return time.perf_counter() - started


def probe_ratio(url: str) -> tuple[float, float, float]:
    catalog = default_catalog()
    exprs = [catalog.get(name).render() for name in PROBES]
    ours_config = {"prometheus_url": url}
    ctk_config = {"prometheus_base_url": url}

    def ours() -> None:
        values = [catalog_probe(name, configuration=ours_config) for name in PROBES]
        assert all(isinstance(v, float) for v in values)

    def ctk() -> None:
        for expr in exprs:
            answer = ctk_query(expr, configuration=ctk_config)
            assert answer["status"] == "success" and answer["data"]["result"]

    ours(), ctk()  # warm-up (imports, first connection)
    ours_times, ctk_times = [], []
    for i in range(ROUNDS):
        pair = [(ours, ours_times), (ctk, ctk_times)]
        for func, times in pair if i % 2 == 0 else reversed(pair):
            times.append(_round(func))
    ours_med, ctk_med = statistics.median(ours_times), statistics.median(ctk_times)
    return ours_med / ctk_med, ours_med, ctk_med


def _abort_once(url: str, metric: Gauge, work: Path) -> float:
    marker = work / "rolled-back"
    marker.unlink(missing_ok=True)
    started = work / "started"
    started.unlink(missing_ok=True)
    stamp = "import sys, time; open(sys.argv[1], 'w').write(repr(time.time()))"
    experiment = {
        "title": "abort latency",
        "description": "wait until the abort watch cuts it short",
        "configuration": {"prometheus_url": url},
        "method": [
            {
                "type": "action",
                "name": "started",
                "provider": {
                    "type": "process",
                    "path": sys.executable,
                    "arguments": ["-c", stamp, str(started)],
                },
            },
            {
                "type": "probe",
                "name": "wait",
                "provider": {"type": "process", "path": "sleep", "arguments": "60", "timeout": 90},
            },
        ],
        "rollbacks": [
            {
                "type": "action",
                "name": "stamp",
                "provider": {
                    "type": "process",
                    "path": sys.executable,
                    "arguments": ["-c", stamp, str(marker)],
                },
            }
        ],
    }
    (work / "experiment.json").write_text(json.dumps(experiment))
    plan = {
        "interval_seconds": 0.5,
        "conditions": [
            {
                "name": "bench-error-ratio",
                "promql": "max(bench_error_ratio)",
                "tolerance": {"op": "<", "threshold": 0.05},
            }
        ],
    }
    (work / "abort.yaml").write_text(yaml.safe_dump(plan))
    env = {**os.environ, "GAMEDAY_LEDGER": str(work / "ledger.sqlite3")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chaos_ext.cli.main",
            "run",
            "--abort-on",
            str(work / "abort.yaml"),
            "--journal",
            str(work / "journal.json"),
            str(work / "experiment.json"),
        ],
        env=env,
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.5)  # a few healthy checks
        metric.set(0.5)
        breach = time.time()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        metric.set(0.0)
    time.sleep(2 * SCRAPE_S)  # let Prometheus see the metric back to normal
    return float(marker.read_text()) - breach


def main() -> None:
    require("prometheus", "prometheus")
    logzero.loglevel(logging.WARNING)  # chaostoolkit-prometheus logs every query at DEBUG
    registry = CollectorRegistry()
    metrics = _platform_metrics(registry)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    target = f"127.0.0.1:{server.server_port}"
    with (
        tempfile.TemporaryDirectory(prefix="bench-prom-") as tmp,
        prometheus.start(
            jobs={job: [target] for job in JOBS}, scrape_interval=f"{SCRAPE_S:g}s"
        ) as prom,
    ):
        prom.wait_scraped(timeout=30)
        _traffic(metrics, 6.0)
        ratio, ours, ctk = probe_ratio(prom.url)
        print(f"steady state of {len(PROBES)} catalog probes, {ROUNDS} rounds each, interleaved:")
        print(f"  chaos_ext catalog_probe   median {ours * 1000:8.2f} ms / round")
        print(f"  chaostoolkit-prometheus   median {ctk * 1000:8.2f} ms / round")
        print(f"  ratio ours/ctk            {ratio:.3f}  (goal <= 1.2)")
        latencies = [
            _abort_once(prom.url, metrics["bench_breach"], Path(tmp)) for _ in range(ABORT_RUNS)
        ]
        abort = statistics.median(latencies)
        shown = ", ".join(f"{x:.3f}" for x in latencies)
        print(f"abort: breach -> rollback done, {ABORT_RUNS} runs: {shown} s")
        print(f"  median {abort:.3f} s = {abort / SCRAPE_S:.2f} scrape intervals ({SCRAPE_S:g} s)")
    server.shutdown()
    thread.join(timeout=5)
    print(f"prometheus probe_time_ratio_vs_ctk={ratio:.3f} abort_latency_s={abort:.3f}")


if __name__ == "__main__":
    main()
