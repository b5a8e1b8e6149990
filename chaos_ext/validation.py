"""Argument checks shared by activities and ``gameday validate``.

Two layers, both pure:

* :func:`check_types` compares JSON arguments with an activity's annotations
  (str, int, float, bool, list, dict, Optional, Literal), so ``"delay_ms": "abc"``
  is refused before anything runs.
* :func:`validated_by` attaches a semantic check (CIDRs, names, ranges) to an
  activity. The activity calls the same check itself when it runs; ``gameday
  validate`` calls it without running anything.

Checks raise :class:`chaos_ext.errors.InvalidArgument` whose message names the
argument and quotes the bad value.
"""

from __future__ import annotations

import inspect
import ipaddress
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from chaos_ext.errors import InvalidArgument

__all__ = [
    "check_activity_arguments",
    "check_types",
    "require_cidrs",
    "require_name",
    "require_range",
    "validated_by",
]

F = TypeVar("F", bound=Callable[..., Any])
Check = Callable[[Mapping[str, Any]], None]
_CHECK_ATTR = "__gameday_check__"
_INJECTED = {"configuration", "secrets"}


def validated_by(check: Check) -> Callable[[F], F]:
    """Attach ``check(arguments)`` to an activity for ``gameday validate``."""

    def attach(func: F) -> F:
        setattr(func, _CHECK_ATTR, check)
        return func

    return attach


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _matches(value: Any, tp: Any) -> bool:  # noqa: PLR0911 - one branch per JSON type
    if tp is Any or tp is inspect.Parameter.empty:
        return True
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in typing.get_args(tp))
    if origin is typing.Literal:
        return value in typing.get_args(tp)
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    base = origin or tp
    if base in (list, tuple, typing.Sequence):
        inner = typing.get_args(tp)
        return isinstance(value, list | tuple) and (
            not inner or all(_matches(v, inner[0]) for v in value)
        )
    if base in (dict, typing.Mapping, Mapping):
        return isinstance(value, dict)
    if isinstance(base, type):
        return isinstance(value, base)
    return True


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_types(func: Callable[..., Any], arguments: Mapping[str, Any]) -> None:
    """Raise InvalidArgument when an argument does not fit its annotation.

    Values that still hold a ``${...}`` substitution are not checked here.
    """
    try:
        hints = typing.get_type_hints(func)
    except (NameError, TypeError):
        hints = {}
    params = inspect.signature(func).parameters
    for name, value in arguments.items():
        if name in _INJECTED or name not in params:
            continue
        if isinstance(value, str) and "${" in value:
            continue
        expected = hints.get(name, params[name].annotation)
        if not _matches(value, expected):
            raise InvalidArgument(
                f"{name}: expected {_type_name(expected)}, got {_describe(value)}"
            )


def _substituted(value: Any) -> bool:
    """Whether a ``${...}`` substitution is left anywhere in a value (also in lists/dicts)."""
    if isinstance(value, str):
        return "${" in value
    if isinstance(value, list | tuple):
        return any(_substituted(v) for v in value)
    if isinstance(value, Mapping):
        return any(_substituted(v) for v in value.values())
    return False


def check_activity_arguments(func: Callable[..., Any], arguments: Mapping[str, Any]) -> None:
    """Type checks, then the activity's own semantic check if it has one."""
    check_types(func, arguments)
    check = getattr(func, _CHECK_ATTR, None)
    if check is None:
        return
    if any(_substituted(v) for v in arguments.values()):
        return  # semantic checks need the substituted values: they run at run time
    check(arguments)


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def require_name(label: str, value: str, *, max_len: int = 63) -> str:
    """A safe identifier (interface, namespace, container): letters, digits, ``_.-``."""
    if not isinstance(value, str) or not _NAME.match(value) or len(value) > max_len:
        raise InvalidArgument(
            f"{label}: {_describe(value)} is not a valid name "
            f"(letters, digits, '_', '.', '-'; at most {max_len} characters)"
        )
    return value


def require_range(label: str, value: float, low: float, high: float) -> float:
    """A number within [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise InvalidArgument(f"{label}: {_describe(value)} is outside [{low:g}, {high:g}]")
    return value


def require_cidrs(
    label: str, values: list[str]
) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Parse a list of CIDRs (a bare address is a /32 or /128)."""
    if not isinstance(values, list) or not values:
        raise InvalidArgument(
            f"{label}: expected a non-empty list of CIDRs, got {_describe(values)}"
        )
    nets = []
    for value in values:
        try:
            nets.append(ipaddress.ip_network(value, strict=False))
        except (TypeError, ValueError):
            raise InvalidArgument(f"{label}: {_describe(value)} is not a CIDR") from None
    return nets
