"""The driver against a real HTTP server: rate, open loop (no coordinated omission), ramp."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.servers.http_target import HttpTarget

from chaos_ext.load.driver import RunningLoad, background_load, load_results, wait_load
from chaos_ext.load.schedule import expected_requests, rate_at
from chaos_ext.load.spec import spec_from_arguments


def _run(
    token: str, results: Path, during: Callable[[RunningLoad], None] | None = None, **args: Any
) -> dict[str, Any]:
    spec = spec_from_arguments(args)
    with background_load(spec, results_dir=results, token=token) as load:
        if during is not None:
            during(load)
        assert wait_load(token, timeout=spec.duration + spec.timeout + 15)
    return load_results(results)


def _scheduled(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The buckets of the schedule (a last one may only hold answers that came after it)."""
    return [b for b in results["buckets"] if b["scheduled"]]


def _sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.time()))


def _server_rate(target: HttpTarget) -> float:
    """The arrival rate the server saw: (arrivals - 1) / (last arrival - first arrival)."""
    stats = target.stats()
    return float((stats["requests"] - 1) / (stats["last_at"] - stats["first_at"]))


def test_achieved_rate_is_within_two_percent_when_the_server_keeps_up(
    target: HttpTarget, load_token: Callable[[], str], tmp_path: Path
) -> None:
    rate = 300
    results = _run(
        load_token(),
        tmp_path,
        urls=[target.url],
        rate=rate,
        duration_seconds=6,
        processes=2,
        concurrency_limit=600,
    )
    summary = {k: results[k] for k in ("sent", "dropped", "errors", "max_lag_ms", "p99_ms")}
    assert results["load"]["status"] == "completed"
    assert results["dropped"] == 0 and results["error_ratio"] == 0, summary
    assert results["ok"] == target.stats()["requests"] == rate * 6
    # independent check at the server: the rate at which requests arrived there
    assert abs(_server_rate(target) - rate) <= 0.02 * rate, _server_rate(target)
    # and the driver's own achieved rate: answers per wall-clock second (two workers
    # merged), over the load less its first and last second
    start = results["load"]["start"]
    middle = load_results(tmp_path, start=start + 1, end=start + 5)
    assert abs(middle["achieved_rate"] - rate) <= 0.02 * rate, middle["achieved_rate"]
    assert [b["ok"] for b in _scheduled(results)] == [rate] * 6


def test_a_server_stall_does_not_slow_the_schedule_and_shows_in_latency(
    target: HttpTarget, load_token: Callable[[], str], tmp_path: Path
) -> None:
    """Coordinated omission: a closed-loop tool would record ~1 slow sample per connection."""
    rate = 200

    def stall(load: RunningLoad) -> None:
        _sleep_until(load.start + 2.0)
        target.pause(1000)

    results = _run(
        load_token(),
        tmp_path,
        stall,
        urls=[target.url],
        rate=rate,
        duration_seconds=6,
        concurrency_limit=1000,
    )
    assert results["dropped"] == 0
    buckets = _scheduled(results)
    # the arrival rate is kept through the stall: every bucket sent its 200
    assert [b["sent"] for b in buckets] == [rate] * 6
    assert abs(_server_rate(target) - rate) <= 0.02 * rate, _server_rate(target)
    # every request scheduled during the stall waited for its end: ~200 slow samples of
    # 1200, spread from ~1000 ms down to ~0, so p90 over the whole load is several
    # hundred ms (with coordinated omission it would stay near the normal latency)
    assert results["p90_ms"] >= 250, results
    assert results["max_ms"] >= 900
    stalled = buckets[2]
    assert stalled["p50_ms"] >= 200, stalled
    assert buckets[0]["p50_ms"] < 100 and buckets[5]["p50_ms"] < 100


def test_a_slower_server_keeps_the_arrival_rate_and_latencies_rise(
    target: HttpTarget, load_token: Callable[[], str], tmp_path: Path
) -> None:
    def slow_down(load: RunningLoad) -> None:
        _sleep_until(load.start + 2.0)
        target.set_latency(300)
        _sleep_until(load.start + 4.0)
        target.set_latency(0)

    results = _run(
        load_token(),
        tmp_path,
        slow_down,
        urls=[target.url],
        rate=100,
        duration_seconds=6,
        concurrency_limit=1000,
    )
    buckets = _scheduled(results)
    assert [b["sent"] for b in buckets] == [100] * 6
    assert results["dropped"] == 0 and results["error_ratio"] == 0
    assert buckets[0]["p50_ms"] < 100 and buckets[5]["p50_ms"] < 100
    assert buckets[2]["p50_ms"] >= 300 and buckets[3]["p50_ms"] >= 300
    assert buckets[2]["service_p50_ms"] >= 300  # the server itself was slow


def test_concurrency_cap_queues_then_drops_without_delaying_the_schedule(
    target: HttpTarget, load_token: Callable[[], str], tmp_path: Path
) -> None:
    target.set_latency(500)
    results = _run(
        load_token(),
        tmp_path,
        urls=[target.url],
        rate=50,
        duration_seconds=2,
        concurrency_limit=5,
        timeout_seconds=1.0,
    )
    assert results["scheduled"] == 100
    # 5 connections busy 500 ms each: ~10 requests/s get one, in arrival order; an arrival
    # that waited a whole timeout (1 s) for a connection is dropped, never sent
    assert 15 <= results["sent"] <= 40, results
    assert results["dropped"] == 100 - results["sent"]
    assert results["error_ratio"] >= 0.6
    assert target.stats()["requests"] == results["sent"]
    # the wait for a connection is part of the latency (measured from the schedule)...
    assert results["p99_ms"] >= 1000
    assert 500 <= results["service_p50_ms"] < 1000  # ...the server's own part is 500 ms
    assert results["errors"]["timeout"] == 0


def test_ramp_follows_its_profile(
    target: HttpTarget, load_token: Callable[[], str], tmp_path: Path
) -> None:
    spec = spec_from_arguments(
        {"urls": [target.url], "ramp": {"from": 20, "to": 300, "over_seconds": 5}}
    )
    results = _run(
        load_token(),
        tmp_path,
        urls=[target.url],
        ramp={"from": 20, "to": 300, "over_seconds": 5},
        concurrency_limit=1000,
    )
    assert results["scheduled"] == spec.total_requests == 800
    assert results["ok"] == 800, {k: results[k] for k in ("dropped", "errors", "max_lag_ms")}
    for i, bucket in enumerate(_scheduled(results)):
        expected = expected_requests(spec.segments, i, i + 1)
        assert abs(bucket["sent"] - expected) <= 1, (i, bucket["sent"], expected)
    # at the server: by each whole wall-clock second, the arrivals so far match the
    # profile's integral up to that instant (within 250 ms worth of requests: the machine
    # is shared, and a starved generator or server shifts arrivals a little)
    start = results["load"]["start"]
    counts = {int(k): v for k, v in target.stats()["per_second"].items()}
    for second in range(int(start) + 1, int(start + 5) + 1):
        arrived = sum(v for k, v in counts.items() if k < second)
        expected = expected_requests(spec.segments, 0, second - start)
        slack = 2 + 0.25 * rate_at(spec.segments, second - start)
        assert abs(arrived - expected) <= slack, (second - start, arrived, expected)
    rates = [b["scheduled_rate"] for b in _scheduled(results)]
    assert rates == sorted(rates)
    # what the server delivered (answers per wall-clock second) rose with it
    answered = [b["achieved_rate"] for b in _scheduled(results)]
    assert answered[-1] > 3 * answered[0]
