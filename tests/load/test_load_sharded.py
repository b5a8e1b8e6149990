"""Load from many pods, for real: shards publish to a real Pushgateway, readers merge them.

drive_http_load(replicas=3, kubernetes=...) creates the Job in the emulator;
the test plays the kubelet (:mod:`support.kubelet`): each pod's container
command runs here as a process, with the env the Job gives it (spec from the
Secret, JOB_COMPLETION_INDEX from the pod). Every shard pushes its per-second
buckets, HdrHistograms included, to Debian's prometheus-pushgateway, which a
real Prometheus scrapes. load_window_stats and stop_http_load merge them.

The merged result is compared with one process sending the same total rate
to the same target: requests within 2 %, p50 and p99 within 10 %. The
target's latency is 50-250 ms, uniform (set by the server, not by this
machine's scheduling noise), so the percentiles are the server's.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.harness import wait_for
from support.k8s_emulator import EmulatorHandle
from support.kubelet import run_pods
from support.servers import monitoring
from support.servers.http_target import HttpTarget

from chaos_ext._products.sandbox.servers import prometheus
from chaos_ext.load import _push
from chaos_ext.load.actions import drive_http_load, stop_http_load
from chaos_ext.load.probes import load_window_stats

NS = "loadtest"
RATE, SECONDS, SHARDS = 60, 15, 3

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


@pytest.fixture
def gateway() -> Iterator[monitoring.Daemon]:
    with monitoring.start_pushgateway() as server:
        yield server


def _close(a: float, b: float, tolerance: float) -> bool:
    return abs(a - b) <= tolerance * max(abs(a), abs(b))


def _compare(single: dict[str, Any], merged: dict[str, Any]) -> str:
    keys = ("scheduled", "sent", "ok", "dropped", "p50_ms", "p99_ms", "max_lag_ms")
    return f"single {[single[k] for k in keys]} merged {[merged[k] for k in keys]} ({keys})"


def _wait_all(procs: list[subprocess.Popen[bytes]], timeout: float, logs: Path) -> None:
    deadline = time.monotonic() + timeout
    for proc in procs:
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    text = "\n".join(p.read_text() for p in sorted(logs.glob("*.log")))
    assert all(p.returncode == 0 for p in procs), text


def _prometheus_total(prom: prometheus.PrometheusServer, load_id: str) -> float:
    query = f'sum(gameday_load_bucket_requests{{kind="sent",load="{load_id}"}})'
    answer = httpx.get(f"{prom.url}/api/v1/query", params={"query": query}, timeout=10).json()
    result = answer["data"]["result"]
    return float(result[0]["value"][1]) if result else 0.0


def test_three_shards_merged_match_one_process_at_the_same_total_rate(
    emulator: EmulatorHandle,
    target: HttpTarget,
    gateway: monitoring.Daemon,
    no_leaked_loads: Path,
    tmp_path: Path,
) -> None:
    target.set_latency(50, spread_ms=200)
    single = drive_http_load(
        urls=[target.url], rate=RATE, duration_seconds=SECONDS, wait=True, name="single"
    )["results"]

    kube = {"namespace": NS, "pushgateway": gateway.url, "start_delay_seconds": 8}
    started = drive_http_load(
        urls=[target.url],
        rate=RATE,
        duration_seconds=SECONDS,
        replicas=SHARDS,
        kubernetes=kube,
        name="sharded",
    )
    load_id = started["ledger_id"]
    wait_for(lambda: len(emulator.items("Pod", NS)) == SHARDS, 15, "the Job's pods")
    with prometheus.start(targets=[gateway.target], scrape_interval="1s") as prom:
        procs = run_pods(emulator, NS, f"gameday.io/load={load_id}", tmp_path)
        # halfway through, the window so far is merged from what the pods published
        time.sleep(max(0.0, started["start"] + SECONDS / 2 - time.time()))
        partial = load_window_stats(ledger_id=load_id, include_buckets=False)
        assert 0 < partial["sent"] < RATE * SECONDS, partial
        _wait_all(procs, started["start"] - time.time() + SECONDS + 60, tmp_path)
        time.sleep(3)  # two scrapes of the final pushes
        scraped = _prometheus_total(prom, load_id)

    stopped = stop_http_load(ledger_id=load_id)
    assert stopped["undone"] == 1, stopped
    merged = stopped["results"][load_id]
    assert merged["load"]["status"] == "completed", merged["load"]
    assert scraped == merged["sent"], (scraped, merged["sent"])  # what Prometheus shows
    report = _compare(single, merged)
    assert merged["scheduled"] == single["scheduled"] == RATE * SECONDS, report
    assert _close(merged["sent"], single["sent"], 0.02), report
    assert _close(merged["ok"], single["ok"], 0.02), report
    assert _close(merged["p50_ms"], single["p50_ms"], 0.10), report
    assert _close(merged["p99_ms"], single["p99_ms"], 0.10), report
    # each pod took a third of the one schedule
    per_shard = [sum(_sent_by_shard(Path(started["results_dir"]), j)) for j in range(SHARDS)]
    assert per_shard == [RATE * SECONDS // SHARDS] * SHARDS, per_shard
    # the Pushgateway forgot the load once its results were kept
    assert _push.read_load(gateway.url, load_id) == ([], [])


def _sent_by_shard(results: Path, shard: int) -> list[int]:
    sent = []
    for path in results.glob(f"worker-s{shard}-*.jsonl"):
        for raw in path.read_text().splitlines():
            line = json.loads(raw)
            sent.append(line["sent"] + line["dropped"])
    return sent
