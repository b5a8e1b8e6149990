"""drive_http_load / stop_http_load / load_window_stats with the ledger, errors, h2, metrics."""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.servers import http_target, nginx
from support.servers.http_target import HttpTarget

from chaos_ext._core.helper import find_helpers
from chaos_ext._core.ledger import Ledger, default_ledger
from chaos_ext.errors import InvalidArgument
from chaos_ext.load.actions import drive_http_load, stop_http_load
from chaos_ext.load.driver import wait_load
from chaos_ext.load.errors import LoadError
from chaos_ext.load.probes import load_window_stats


@pytest.fixture
def second_target() -> Iterator[HttpTarget]:
    with http_target.start() as server:
        yield server


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_errors_are_classified_by_kind(
    no_leaked_loads: Path, target: HttpTarget, second_target: HttpTarget
) -> None:
    target.set_errors(503, every=5)
    second_target.set_errors(404, every=4)
    slow = second_target  # a third behaviour on its own path would mix counts: use timeouts below
    common = {"rate": 20.0, "duration_seconds": 2.0}
    started = {
        "5xx": drive_http_load(urls=[target.url], name="five", **common),
        "4xx": drive_http_load(urls=[second_target.url], name="four", **common),
        "connect": drive_http_load(urls=f"http://127.0.0.1:{_closed_port()}/", **common),
        # a name the resolver rejects locally: a real gaierror without any DNS query
        "dns": drive_http_load(urls="http://-bad-/", **common),
    }
    for load in started.values():
        assert wait_load(load["ledger_id"], timeout=20)
    results = {
        kind: stop_http_load(ledger_id=load["ledger_id"])["results"][load["ledger_id"]]
        for kind, load in started.items()
    }
    assert results["5xx"]["errors"]["http_5xx"] == target.stats()["errors"] == 8
    assert results["5xx"]["status"] == {"2xx": 32, "5xx": 8}
    assert results["5xx"]["error_ratio"] == pytest.approx(0.2)
    assert results["4xx"]["errors"]["http_4xx"] == slow.stats()["errors"] == 10
    assert results["connect"]["errors"]["connect"] == 40
    assert results["dns"]["errors"]["dns"] == 40
    for result in results.values():
        assert result["scheduled"] == 40
        assert sum(result["errors"].values()) + result["ok"] == 40
    assert Ledger(no_leaked_loads).open_entries() == []


def test_timeouts_are_classified(no_leaked_loads: Path, target: HttpTarget) -> None:
    target.set_latency(1000)
    result = drive_http_load(
        urls=[target.url], rate=10, duration_seconds=1, timeout_seconds=0.2, wait=True
    )
    assert result["results"]["errors"]["timeout"] == 10
    assert result["results"]["error_ratio"] == 1.0
    assert Ledger(no_leaked_loads).open_entries() == []


@pytest.mark.rolls_back("http-load")
def test_background_load_is_in_the_ledger_and_stopped_by_the_rollback(
    no_leaked_loads: Path, target: HttpTarget
) -> None:
    started = drive_http_load(urls=[target.url], rate=50, duration_seconds=30, name="bg")
    assert started["expected_requests"] == 1500
    (entry,) = Ledger(no_leaked_loads).open_entries()
    assert (entry.kind, entry.target) == ("http-load", "bg")
    assert find_helpers(entry.id)
    time.sleep(max(0.0, started["start"] + 2.2 - time.time()))
    stopped = stop_http_load(name="bg")
    stopped_at = time.time()
    assert stopped["undone"] == 1 and stopped["faults"][0]["ledger_id"] == entry.id
    results = stopped["results"][entry.id]
    assert results["load"]["status"] == "stopped"
    assert not find_helpers(entry.id)
    # two full seconds were sent before the stop (the buckets below), and never more than 50/s
    # allows up to the moment the stop returned: a ratio to the measured time, not a fixed window
    # that a slow stop on a busy machine could overrun
    assert 100 <= results["sent"] <= 50 * (stopped_at - started["start"]) + 1
    assert [b["sent"] for b in results["buckets"]][:2] == [50, 50]
    before = target.stats()["requests"]
    time.sleep(1.0)
    assert target.stats()["requests"] == before  # nothing keeps sending
    again = stop_http_load(name="bg")  # idempotent: nothing left to stop, the results stay
    assert again["undone"] == 0 and again["results"][entry.id]["sent"] == results["sent"]
    assert stop_http_load(name="nope") == {
        "undone": 0,
        "faults": [],
        "left_alone": [],
        "results": {},
    }


def test_window_stats_over_a_named_fault(no_leaked_loads: Path, target: HttpTarget) -> None:
    started = drive_http_load(urls=[target.url], rate=50, duration_seconds=6, name="judge")
    book = default_ledger()
    time.sleep(max(0.0, started["start"] + 2.0 - time.time()))
    # a fault recorded as any action would: the target gets slow while it is open
    entry = book.record(kind="test-latency", target="target/app", recipe={}, module=__name__)
    target.set_latency(200)
    time.sleep(2.0)
    target.set_latency(0)
    book.close(entry.id, "latency removed")
    assert wait_load(started["ledger_id"], timeout=20)
    during = load_window_stats(name="judge", fault_kind="test-latency", fault_target="app")
    assert 1 <= during["buckets_count"] <= 3
    assert during["p50_ms"] >= 200
    assert during["error_ratio"] == 0
    before = load_window_stats(name="judge", from_seconds=0, to_seconds=2)
    assert before["buckets_count"] == 2
    assert before["p50_ms"] < 100
    assert load_window_stats()["scheduled"] == 300  # this run's latest load, whole
    with pytest.raises(LoadError, match="no fault of kind 'netem'"):
        load_window_stats(fault_kind="netem")
    with pytest.raises(InvalidArgument, match="not both"):
        load_window_stats(fault_kind="test-latency", from_seconds=1)
    with pytest.raises(LoadError, match="nothing to judge"):
        load_window_stats(from_seconds=100, to_seconds=200)
    stop_http_load()


def test_baseline_is_measured_when_the_run_has_no_load_yet(
    no_leaked_loads: Path, target: HttpTarget
) -> None:
    with pytest.raises(LoadError, match="no HTTP load"):
        load_window_stats()
    baseline = load_window_stats(baseline_urls=[target.url], baseline_rate=20, baseline_seconds=1)
    assert baseline["baseline"] is True
    assert baseline["ok"] == 20 == target.stats()["requests"]
    assert Ledger(no_leaked_loads).open_entries() == []


def test_http2_against_nginx_h2c(no_leaked_loads: Path) -> None:
    with nginx.start(http2=True) as server:
        result = drive_http_load(
            urls=[server.url],
            rate=50,
            duration_seconds=2,
            http2=True,
            concurrency_limit=500,
            wait=True,
        )
        summary = {k: result["results"][k] for k in ("dropped", "errors", "p99_ms")}
        assert result["results"]["ok"] == 100, summary
        # the same server refuses HTTP/1.1 (it only speaks h2c there): errors, not silence
        refused = drive_http_load(urls=[server.url], rate=10, duration_seconds=1, wait=True)
        assert refused["results"]["ok"] == 0
        assert refused["results"]["error_ratio"] == 1.0


def _scrape(port: int) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {
        (s.name, s.labels.get("outcome", s.labels.get("le", ""))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.labels.get("load") == "m"
    }


def test_prometheus_exposition(no_leaked_loads: Path, target: HttpTarget) -> None:
    target.set_errors(500, every=10)
    started = drive_http_load(
        urls=[target.url], rate=50, duration_seconds=2, metrics_port=-1, name="m"
    )
    port = started["metrics_port"]
    assert port > 0
    time.sleep(max(0.0, started["start"] + 1.5 - time.time()))
    during = _scrape(port)
    assert 25 <= during[("gameday_load_requests_total", "ok")] <= 70, during
    assert during[("gameday_load_target_rate", "")] == pytest.approx(50)
    assert wait_load(started["ledger_id"], timeout=20, results_dir=Path(started["results_dir"]))
    samples = _scrape(port)  # the endpoint outlives the load so the final counts are seen
    assert samples[("gameday_load_requests_total", "ok")] == 90
    assert samples[("gameday_load_requests_total", "http_5xx")] == 10
    assert samples[("gameday_load_request_duration_seconds_count", "")] == 100
    assert samples[("gameday_load_request_duration_seconds_bucket", "+Inf")] == 100
    assert samples[("gameday_load_request_duration_seconds_bucket", "1")] == 100
    stop_http_load(name="m")
