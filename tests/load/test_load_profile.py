"""Pure parts: the arrival schedule of each profile and the argument checks."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest

from chaos_ext.errors import InvalidArgument
from chaos_ext.load.schedule import arrival_offsets, expected_requests, rate_at
from chaos_ext.load.spec import Segment, spec_from_arguments

URL = "http://127.0.0.1:9/"


def _spec(**arguments: Any) -> Any:
    return spec_from_arguments({"urls": [URL], **arguments})


def test_constant_rate_is_evenly_spaced() -> None:
    offsets = [t for _, t in arrival_offsets(_spec(rate=50, duration_seconds=2).segments)]
    assert len(offsets) == 100
    gaps = {round(b - a, 9) for a, b in itertools.pairwise(offsets)}
    assert gaps == {0.02}


def test_ramp_follows_the_integral_of_its_rate() -> None:
    spec = _spec(ramp={"from": 10, "to": 110, "over_seconds": 10})
    offsets = [t for _, t in arrival_offsets(spec.segments)]
    assert len(offsets) == 600  # (10 + 110) / 2 * 10
    for second in range(10):
        count = sum(1 for t in offsets if second <= t < second + 1)
        assert count == pytest.approx(expected_requests(spec.segments, second, second + 1), abs=1)
    # the rate rises: the first second has ~15 requests, the last ~105
    assert sum(1 for t in offsets if t < 1) in (15, 16)
    assert sum(1 for t in offsets if t >= 9) in (104, 105, 106)


def test_ramp_with_hold_and_steps() -> None:
    held = _spec(ramp={"from": 0, "to": 100, "over_seconds": 2}, duration_seconds=5)
    assert [s.duration for s in held.segments] == [2, 3]
    assert held.total_requests == 100 + 300
    steps = _spec(
        steps=[
            {"rate": 10, "for_seconds": 2},
            {"rate": 0, "for_seconds": 1},
            {"rate": 40, "for_seconds": 1},
        ]
    )
    offsets = [t for _, t in arrival_offsets(steps.segments)]
    assert len(offsets) == 60
    assert not [t for t in offsets if 2 <= t < 3]  # the pause step sends nothing
    assert sum(1 for t in offsets if t >= 3) == 40


def test_workers_split_one_schedule() -> None:
    segments = (Segment(3.0, 20.0, 80.0),)
    whole = list(arrival_offsets(segments))
    parts = [list(arrival_offsets(segments, first=i, step=3)) for i in range(3)]
    assert sorted(p for part in parts for p in part) == whole


def test_defaults_are_small() -> None:
    spec = _spec()
    assert (spec.peak_rate, spec.duration, spec.processes) == (10, 30, 1)
    assert math.isclose(spec.timeout, 5.0)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"rate": 501}, "above the cap 500; above 500 req/s set max_rate"),
        ({"rate": 600, "max_rate": 550}, "above the cap 550"),
        ({"duration_seconds": 601}, "set max_duration_seconds explicitly"),
        ({"ramp": {"from": 1, "to": 900, "over_seconds": 10}}, "peak 900"),
        ({"ramp": {"from": 1, "to": 9}}, "missing ['over_seconds']"),
        (
            {"ramp": {"from": 1, "to": 9, "over_seconds": 10}, "duration_seconds": 5},
            "shorter than the ramp",
        ),
        (
            {"steps": [{"rate": 1, "for_seconds": 2}], "duration_seconds": 5},
            "differs from the steps",
        ),
        ({"steps": [{"rate": 1}]}, "steps[0]"),
        (
            {
                "ramp": {"from": 1, "to": 2, "over_seconds": 1},
                "steps": [{"rate": 1, "for_seconds": 1}],
            },
            "not both",
        ),
        ({"urls": ["ftp://x/"]}, "not an http"),
        ({"urls": ["http://user:pw@x/"]}, "credentials in the URL are refused"),
        ({"urls": []}, "1 to 100 URLs"),
        ({"method": "TRACE"}, "method"),
        ({"concurrency_limit": 0}, "concurrency_limit"),
        ({"timeout_seconds": 500}, "timeout_seconds"),
        ({"metrics_addr": "localhost"}, "not an IP address"),
        ({"rate": 60_000, "max_rate": 60_000}, "outside [0.001, 50000]"),
        ({"steps": [{"rate": 0, "for_seconds": 2}]}, "never sends anything"),
        # an old name would fall back to the 30 s default: the sandbox's 1 h traffic did
        ({"duration": 3600}, "unknown load argument(s) duration;"),
        ({"timeout": 5, "max_duration": 9}, "unknown load argument(s) max_duration, timeout;"),
        ({"wait": True}, "unknown load argument(s) wait;"),
    ],
)
def test_refused_arguments(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        spec_from_arguments({"urls": [URL], **arguments})
    assert message in str(info.value)


def test_explicit_caps_allow_bigger_loads() -> None:
    spec = _spec(rate=2000, duration_seconds=900, max_rate=2000, max_duration_seconds=900)
    assert spec.peak_rate == 2000
    assert spec.duration == 900
    assert spec.public()["body"] == "<0 bytes>"


def test_headers_and_body_stay_out_of_public_views() -> None:
    spec = _spec(headers={"Authorization": "Bearer s3cr3t"}, body="token=s3cr3t", method="post")
    assert "s3cr3t" not in repr(spec)
    assert "s3cr3t" not in str(spec.public())
    assert spec.to_payload()["headers"] == {"Authorization": "Bearer s3cr3t"}
    assert spec.method == "POST"


def test_rate_at_follows_the_profile() -> None:
    spec = _spec(ramp={"from": 10, "to": 110, "over_seconds": 10}, duration_seconds=12)
    assert [rate_at(spec.segments, t) for t in (0, 5, 10, 11.9, 12, -1)] == [10, 60, 110, 110, 0, 0]
