"""Onset, share, breaking point and amplification, on inputs computed by hand."""

from __future__ import annotations

import pytest

from chaos_ext.errors import InvalidArgument
from chaos_ext.load.onset import (
    DEFAULT_CLASSES,
    BucketCounts,
    amplification,
    breaking_point,
    class_counts,
    error_classes,
)


def _b(offset: float, scheduled: int, **errors: int) -> BucketCounts:
    causes = {k.replace("_", "-"): v for k, v in errors.items() if k in ("db_connect", "dns")}
    kinds = {k: v for k, v in errors.items() if k not in ("db_connect", "dns", "dropped")}
    # every server cause is one 5xx the client saw
    if causes:
        kinds["http_5xx"] = kinds.get("http_5xx", 0) + sum(causes.values())
    return BucketCounts(offset, 1.0, scheduled, kinds, errors.get("dropped", 0), causes)


# A ramp of 10, 20, 30, 40, 50 req/s (one bucket a second):
#   t=0  10 scheduled, no error
#   t=1  20 scheduled, 1 db refusal
#   t=2  30 scheduled, 3 db refusals, 2 dns
#   t=3  40 scheduled, 4 db refusals, 6 dns, 1 client timeout
#   t=4  50 scheduled, 2 db refusals, 10 dns, 2 timeouts, 1 dropped
# totals: db-refused 10, dns 18, upstream-timeout 4 (3 timeouts + 1 dropped): 32 errors
RAMP = [
    _b(0, 10),
    _b(1, 20, db_connect=1),
    _b(2, 30, db_connect=3, dns=2),
    _b(3, 40, db_connect=4, dns=6, timeout=1),
    _b(4, 50, db_connect=2, dns=10, timeout=2, dropped=1),
]


def test_each_class_has_its_count_share_and_onset_load() -> None:
    found = {c.error_class: c for c in error_classes(RAMP)}
    assert set(found) == {"db-refused", "dns", "upstream-timeout"}
    assert (found["db-refused"].count, found["db-refused"].onset_rate) == (10, 20.0)
    assert found["db-refused"].share == pytest.approx(10 / 32)
    assert (found["dns"].count, found["dns"].onset_rate) == (18, 30.0)
    assert found["dns"].share == pytest.approx(18 / 32)
    assert found["dns"].onset_offset_seconds == 2.0
    assert (found["upstream-timeout"].count, found["upstream-timeout"].onset_rate) == (4, 40.0)
    assert sum(c.share for c in found.values()) == pytest.approx(1.0)
    # largest first
    assert [c.error_class for c in error_classes(RAMP)] == ["dns", "db-refused", "upstream-timeout"]


def test_min_errors_moves_the_onset_to_the_first_bucket_with_that_many() -> None:
    found = {c.error_class: c for c in error_classes(RAMP, min_errors=3)}
    assert found["db-refused"].onset_rate == 30.0  # 1 at 20 req/s is not enough
    assert found["dns"].onset_rate == 40.0  # 2 at 30, 6 at 40
    assert found["upstream-timeout"].onset_rate == 50.0  # 1, then 2 + 1 dropped = 3
    # a class that never reaches min_errors in one bucket has no onset, but keeps its count
    assert {c.error_class: c.onset_rate for c in error_classes(RAMP, min_errors=11)} == {
        "dns": None,
        "db-refused": None,
        "upstream-timeout": None,
    }


def test_a_5xx_without_a_cause_stays_http_5xx_and_unknown_causes_are_their_own_class() -> None:
    bucket = BucketCounts(0, 1.0, 10, {"http_5xx": 5, "connect": 1}, 0, {"db-connect": 2, "x": 1})
    assert class_counts(bucket, DEFAULT_CLASSES) == {
        "db-refused": 2,
        "x": 1,
        "http-5xx": 2,  # 5 5xx, 3 of them explained
        "connect": 1,
    }


def test_the_load_of_a_bucket_is_its_scheduled_requests_over_its_seconds() -> None:
    assert BucketCounts(0, 0.5, 12, {}).rate == 24.0


def test_breaking_point_is_the_first_trailing_window_over_the_slo() -> None:
    # trailing 2-bucket windows: t=1: 1/30; t=2: 6/50 = 0.12; t=3: 20/70; t=4: ...
    broke = breaking_point(RAMP, max_error_ratio=0.1, window=2)
    assert broke is not None
    assert (broke["offset_seconds"], broke["rate"]) == (2.0, 30.0)
    assert broke["error_ratio"] == pytest.approx(6 / 50)
    assert broke["crossed"] == ["error_ratio"]
    # 1/30 = 0.033 at t=1 is over 2 %
    assert breaking_point(RAMP, max_error_ratio=0.02, window=2)["rate"] == 20.0  # type: ignore[index]
    assert breaking_point(RAMP[:1], max_error_ratio=0.0, window=1) is None


def test_a_p95_over_its_limit_breaks_the_slo_too() -> None:
    quiet = [_b(t, 10) for t in range(4)]
    p95s = {0: 100.0, 1: 120.0, 2: 900.0, 3: 950.0}
    broke = breaking_point(
        quiet, max_error_ratio=0.01, window=1, p95_of=lambda _f, last: p95s[last], max_p95_ms=500
    )
    assert broke is not None and broke["offset_seconds"] == 2.0 and broke["crossed"] == ["p95"]
    # without a p95 limit the same load holds
    assert breaking_point(quiet, max_error_ratio=0.01, window=1, p95_of=lambda *_: 900.0) is None


def test_amplification_is_added_response_time_over_added_round_trip_time() -> None:
    # the incident: a page went from 1.0 s to 3.9 s with ~0.5 s more per round trip
    assert amplification(1.0, 3.9, 0.0005, 0.5005) == pytest.approx(5.8)
    # the sandbox: median 40 ms -> 640 ms with the RTT 0.3 ms -> 100.3 ms: 6 round trips
    assert amplification(40.0, 640.0, 0.3, 100.3) == pytest.approx(6.0)
    with pytest.raises(InvalidArgument, match="no round-trip time"):
        amplification(1.0, 2.0, 5.0, 5.0)


def test_invalid_windows_are_refused() -> None:
    with pytest.raises(InvalidArgument):
        error_classes(RAMP, min_errors=0)
    with pytest.raises(InvalidArgument):
        breaking_point(RAMP, max_error_ratio=0.1, window=0)
