"""Envelope settings (--vary, the gameday extension) and applying a magnitude (pure)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from chaos_ext._products.envelope.spec import (
    apply_magnitude,
    parse_resolution,
    parse_vary,
    settings_from,
    unit_of,
)
from chaos_ext.errors import InvalidArgument

EXPERIMENT: dict[str, Any] = {
    "title": "t",
    "description": "d",
    "method": [
        {
            "type": "action",
            "name": "delay-app-to-db",
            "provider": {
                "type": "python",
                "module": "chaos_ext.network.actions",
                "func": "add_latency",
                "arguments": {
                    "interface": "eth0",
                    "delay_seconds": 0.15,
                    "destinations": ["10.0.0.1"],
                },
            },
        },
        {"type": "probe", "name": "p", "provider": {"type": "http", "url": "http://x"}},
    ],
}


def with_extension(**envelope: Any) -> dict[str, Any]:
    return {**EXPERIMENT, "extensions": [{"name": "gameday", "envelope": envelope}]}


def test_vary_parses_activity_argument_and_range() -> None:
    vary = parse_vary("delay-app-to-db.delay_seconds=10..800")
    assert (vary.activity, vary.argument, vary.low, vary.high, vary.integer) == (
        "delay-app-to-db",
        "delay_seconds",
        10,
        800,
        True,
    )
    assert parse_vary("a.b.c.rate=0.5..2.5").activity == "a.b.c"
    assert not parse_vary("x.rate=0.5..2").integer
    assert parse_vary("x.offset=-5..5").low == -5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("delay_seconds=10..800", "is not ACTIVITY.ARGUMENT=LOW..HIGH"),
        ("a.delay_seconds=10", "both ends are required"),
        ("a.delay_seconds=..800", "both ends are required"),
        ("a.delay_seconds=800..10", "needs LOW < HIGH"),
        ("a.delay_seconds=ten..800", "range LOW..HIGH of numbers"),
    ],
)
def test_bad_vary_is_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        parse_vary(text)


def test_resolution_is_absolute_or_a_percentage() -> None:
    assert parse_resolution(5) == (5.0, False)
    assert parse_resolution("2.5") == (2.5, False)
    assert parse_resolution("10%") == pytest.approx((0.1, True))
    for bad in ("0", "-1", "100%", "abc", True, None):
        with pytest.raises(InvalidArgument, match="resolution"):
            parse_resolution(bad)


def test_units_come_from_the_argument_name() -> None:
    assert [unit_of(a) for a in ("p99_ms", "hold_seconds", "connections")] == [
        "ms",
        "s",
        "connections",
    ]


def test_the_extension_holds_the_settings_and_options_override_them() -> None:
    experiment = with_extension(
        vary="delay-app-to-db.delay_seconds=10..800",
        resolution="10%",
        repeats=3,
        settle_seconds=20,
        label="fragile",
    )
    settings = settings_from(experiment, {"repeats": 1, "resolution": None}, "stem")
    space = settings.search.space
    assert (space.low, space.high, space.resolution, space.relative) == (10, 800, 0.1, True)
    assert settings.search.repeats == 1  # the command line wins
    assert (settings.settle_seconds, settings.label, settings.unit) == (20, "fragile", "s")
    assert settings.worst_case_runs <= settings.search.max_runs


def test_defaults_integer_resolution_one_else_five_percent() -> None:
    ints = settings_from(EXPERIMENT, {"vary": "delay-app-to-db.delay_seconds=10..800"}, "s")
    assert (ints.search.space.resolution, ints.search.space.integer) == (1, True)
    assert ints.label == "s" and ints.search.repeats == 2 and ints.search.max_runs == 20
    floats = settings_from(EXPERIMENT, {"vary": "delay-app-to-db.delay_seconds=10.0..800"}, "s")
    assert (floats.search.space.resolution, floats.search.space.relative) == (0.05, True)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({}, "what to vary"),
        ({"vary": "delay-app-to-db.delay_seconds=1..100000", "max_runs": 10}, "may need 23 runs"),
        ({"vary": "delay-app-to-db.delay_seconds=1..8", "repeats": 21}, "repeats"),
        ({"vary": "delay-app-to-db.delay_seconds=1..8", "max_runs": 0}, "max_runs"),
        ({"vary": "delay-app-to-db.delay_seconds=1..8", "direction": "sideways"}, "up or down"),
        ({"vary": "delay-app-to-db.delay_seconds=1..8", "settle_seconds": -1}, "settle_seconds"),
        ({"vary": "delay-app-to-db.delay_seconds=1..8", "format": "max-minus"}, "exactly one"),
        ({"vary": "delay-app-to-db.delay_seconds=-5.0..5", "resolution": "5%"}, "unboundedly many"),
    ],
)
def test_bad_settings_are_refused_before_anything_runs(
    overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        settings_from(EXPERIMENT, overrides, "s")


def test_unknown_extension_keys_are_refused() -> None:
    with pytest.raises(InvalidArgument, match="unknown key"):
        settings_from(with_extension(vary="delay-app-to-db.delay_seconds=1..8", repeat=3), {}, "s")


def test_apply_magnitude_changes_a_copy_and_notes_the_run() -> None:
    original = copy.deepcopy(EXPERIMENT)
    settings = settings_from(EXPERIMENT, {"vary": "delay-app-to-db.delay_seconds=10..800"}, "s")
    applied = apply_magnitude(EXPERIMENT, settings, 405, run=3)
    assert EXPERIMENT == original
    assert applied["method"][0]["provider"]["arguments"]["delay_seconds"] == 405
    assert type(applied["method"][0]["provider"]["arguments"]["delay_seconds"]) is int
    (ext,) = applied["extensions"]
    assert ext["envelope_run"] == {
        "magnitude": 405,
        "argument": "delay_seconds",
        "activity": "delay-app-to-db",
        "run": 3,
    }
    with pytest.raises(InvalidArgument, match="outside"):
        apply_magnitude(EXPERIMENT, settings, 801)


def test_a_format_renders_the_magnitude_into_a_string_argument() -> None:
    settings = settings_from(
        EXPERIMENT,
        {
            "vary": "delay-app-to-db.delay_seconds=0..20",
            "format": "max-minus-{}",
            "direction": "down",
        },
        "s",
    )
    applied = apply_magnitude(EXPERIMENT, settings, 7)
    assert applied["method"][0]["provider"]["arguments"]["delay_seconds"] == "max-minus-7"
    assert settings.search.space.mild == 20


def test_varying_an_unknown_or_non_python_activity_is_refused() -> None:
    settings = settings_from(EXPERIMENT, {"vary": "nope.delay_seconds=1..8"}, "s")
    with pytest.raises(InvalidArgument, match=r"no method activity named 'nope' \(method: "):
        apply_magnitude(EXPERIMENT, settings, 2)
    settings = settings_from(EXPERIMENT, {"vary": "p.url=1..8"}, "s")
    with pytest.raises(InvalidArgument, match="no Python provider"):
        apply_magnitude(EXPERIMENT, settings, 2)
