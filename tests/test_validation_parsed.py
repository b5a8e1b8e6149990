"""``@validated_by`` parses once: what the check returns reaches the activity as ``parsed``."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import pytest

from chaos_ext import activity_modules
from chaos_ext._core.contract import Configuration, Secrets
from chaos_ext._core.validation import PARSED, check_activity_arguments, validated_by
from chaos_ext.errors import InvalidArgument

calls: list[dict[str, Any]] = []


def _parse(arguments: Mapping[str, Any]) -> tuple[str, float]:
    calls.append(dict(arguments))
    if arguments.get("hold_seconds", 1) < 0:
        raise InvalidArgument(f"hold_seconds: {arguments['hold_seconds']} is negative")
    return str(arguments.get("target", "")).upper(), float(arguments.get("hold_seconds", 1))


@validated_by(_parse)
def act(
    target: str,
    hold_seconds: float = 1,
    configuration: Configuration = None,
    secrets: Secrets = None,
    *,
    parsed: tuple[str, float] = PARSED,
) -> dict[str, Any]:
    """Return what the check parsed (the test's own activity)."""
    return {"parsed": parsed}


def test_the_activity_receives_what_the_check_parsed_and_the_check_runs_once() -> None:
    calls.clear()
    assert act("app") == {"parsed": ("APP", 1.0)}
    assert calls == [{"target": "app", "hold_seconds": 1}]  # defaults applied, once


def test_parsed_is_not_in_the_public_signature() -> None:
    assert list(inspect.signature(act).parameters) == [
        "target",
        "hold_seconds",
        "configuration",
        "secrets",
    ]
    assert "parsed" not in act.__annotations__


def test_a_bad_argument_is_refused_before_the_body_and_validate_sees_the_same() -> None:
    with pytest.raises(InvalidArgument, match="hold_seconds: -1 is negative"):
        act("app", hold_seconds=-1)
    with pytest.raises(InvalidArgument, match="hold_seconds: -1 is negative"):
        check_activity_arguments(act, {"target": "app", "hold_seconds": -1})
    with pytest.raises(InvalidArgument, match="hold_seconds: expected float"):
        act("app", hold_seconds="x")  # type: ignore[arg-type]


def test_parsed_needs_a_check_and_is_keyword_only() -> None:
    def body(target: str, *, parsed: Any = PARSED) -> None:
        """No check to parse with."""

    with pytest.raises(TypeError, match="keyword-only and needs a check"):
        validated_by()(body)


def test_no_real_activity_shows_parsed_to_chaostoolkit() -> None:
    import importlib  # noqa: PLC0415

    with_parsed = []
    for module_name, _ in activity_modules():
        module = importlib.import_module(module_name)
        for name in module.__all__:
            func = getattr(module, name)
            assert "parsed" not in inspect.signature(func).parameters, name
            if "parsed" in inspect.signature(inspect.unwrap(func)).parameters:
                with_parsed.append(name)
    assert {"add_latency", "drive_http_load", "limit_dns_rate", "alerts_quiet"} <= set(with_parsed)
