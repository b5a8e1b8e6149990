"""Argument checks shared by activities and ``gameday validate``.

Two layers, both pure:

* :func:`check_types` compares JSON arguments with an activity's annotations
  (str, int, float, bool, list, dict, Optional, Literal), so ``"delay_seconds": "abc"``
  is refused before anything runs.
* :func:`validated_by` wraps an activity so that every call (``gameday run``,
  plain ``chaos run``, Python) first runs the type checks and its semantic check
  (CIDRs, names, ranges, PromQL) on the arguments it was given, and refuses bad
  ones before anything is touched; ``gameday validate`` runs the very same
  :func:`check_activity_arguments` without calling the activity. A check that
  parses returns what it parsed, and the activity receives it as ``parsed``
  (checked once, never again in the body).

Checks raise :class:`chaos_ext.errors.InvalidArgument` whose message names the
argument and quotes the bad value.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import ipaddress
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from chaos_ext.errors import InvalidArgument

__all__ = [
    "PARSED",
    "argument_problems",
    "check_activity_arguments",
    "check_types",
    "is_checked",
    "parsed_arguments",
    "require_cidrs",
    "require_name",
    "require_range",
    "semantic_check",
    "type_problems",
    "validated_by",
]

F = TypeVar("F", bound=Callable[..., Any])
Check = Callable[[Mapping[str, Any]], Any]
_CHECK_ATTR = "__gameday_check__"
_PARSED = "parsed"
PARSED: Any = None
"""The default of an activity's keyword-only ``parsed`` argument; :func:`validated_by` fills it."""
_INJECTED = {"configuration", "secrets"}
_collecting: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "gameday_argument_problems", default=None
)
T = TypeVar("T")


def _refused(message: str, stand_in: T) -> T:
    """Raise :class:`InvalidArgument`; while :func:`argument_problems` collects, note the
    problem instead and go on with a stand-in that passes, so that the check reaches the
    next argument (``gameday validate`` lists every problem, a call stops at the first)."""
    found = _collecting.get()
    if found is None:
        raise InvalidArgument(message)
    found.append(message)
    return stand_in


def validated_by(check: Check | None = None) -> Callable[[F], F]:
    """Check an activity's arguments on every call, with ``check`` after the type checks.

    ``@validated_by()`` (no semantic check) still checks types. The wrapper binds
    the call's arguments and runs :func:`check_activity_arguments` on those given
    (defaults are not checked, exactly as ``gameday validate`` sees an experiment);
    an :class:`~chaos_ext.errors.InvalidArgument` leaves the activity before its
    body runs: no ledger entry, no connection.

    Parse once: when the activity declares a keyword-only ``parsed`` argument
    (``*, parsed: LatencySpec = PARSED``), ``check`` is called with every
    argument, defaults applied, and what it returns (the parsed, typed spec) is
    handed to the body as ``parsed``; the body does not check again. ``parsed``
    is not part of the public signature (``chaos discover``, chaoslib's
    argument check and ``gameday validate`` do not see it).
    """

    def attach(func: F) -> F:
        signature = inspect.signature(func)
        wants_parsed = _PARSED in signature.parameters
        if wants_parsed and (
            check is None
            or signature.parameters[_PARSED].kind is not inspect.Parameter.KEYWORD_ONLY
        ):
            raise TypeError(f"{func.__name__}: 'parsed' is keyword-only and needs a check")
        public = signature.replace(
            parameters=[p for p in signature.parameters.values() if p.name != _PARSED]
        )

        @functools.wraps(func)
        def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                bound = public.bind(*args, **kwargs)
            except TypeError:
                return func(*args, **kwargs)  # Python's own message names the argument
            given = {k: v for k, v in bound.arguments.items() if k not in _INJECTED}
            if not wants_parsed:
                _check(func, check, given, run_time=True)
                return func(*args, **kwargs)
            check_types(inspect.unwrap(func), given, run_time=True)
            bound.apply_defaults()
            every = {k: v for k, v in bound.arguments.items() if k not in _INJECTED}
            return func(*args, **kwargs, parsed=check(every))  # type: ignore[misc]

        checked.__signature__ = public  # type: ignore[attr-defined]
        checked.__annotations__ = {k: v for k, v in func.__annotations__.items() if k != _PARSED}
        setattr(checked, _CHECK_ATTR, check)
        return checked  # type: ignore[return-value]

    return attach


def is_checked(func: Callable[..., Any]) -> bool:
    """Whether ``func`` checks its arguments when called (wrapped by :func:`validated_by`)."""
    return hasattr(func, _CHECK_ATTR) and hasattr(func, "__wrapped__")


def parsed_arguments(func: Callable[..., Any], arguments: Mapping[str, Any]) -> Any:
    """What ``func``'s own check returns for ``arguments`` (types checked first, at run
    time, as a call would); None when it has no check. For plans: parse once, the
    same way the action does."""
    check_types(inspect.unwrap(func), arguments, run_time=True)
    check = getattr(func, _CHECK_ATTR, None)
    return check(arguments) if check is not None else None


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


@functools.lru_cache(maxsize=1024)
def _annotations(
    func: Callable[..., Any],
) -> tuple[dict[str, Any], Mapping[str, inspect.Parameter]]:
    """``func``'s resolved type hints and parameters, worked out once per function (an
    activity checks its arguments on every call: resolving them again costs more than the
    checks)."""
    try:
        hints = typing.get_type_hints(func)
    except (NameError, TypeError):
        hints = {}
    return hints, inspect.signature(func).parameters


def type_problems(
    func: Callable[..., Any], arguments: Mapping[str, Any], *, run_time: bool = False
) -> list[str]:
    """One message per argument that does not fit its annotation.

    Before the run, values that still hold a ``${...}`` substitution are not
    checked (their value is only known then); at run time everything is.
    """
    hints, params = _annotations(func)
    problems = []
    for name, value in arguments.items():
        if name in _INJECTED or name == _PARSED or name not in params:
            continue
        if not run_time and isinstance(value, str) and "${" in value:
            continue
        expected = hints.get(name, params[name].annotation)
        typed = expected not in (Any, inspect.Parameter.empty)
        if typed and isinstance(value, float) and not math.isfinite(value):
            problems.append(f"{name}: {value!r} is not a finite number")
        elif not _matches(value, expected):
            problems.append(f"{name}: expected {_type_name(expected)}, got {_describe(value)}")
    return problems


def check_types(
    func: Callable[..., Any], arguments: Mapping[str, Any], *, run_time: bool = False
) -> None:
    """Raise InvalidArgument for the first argument that does not fit its annotation."""
    problems = type_problems(func, arguments, run_time=run_time)
    if problems:
        raise InvalidArgument(problems[0])


def semantic_check(func: Callable[..., Any], arguments: Mapping[str, Any]) -> None:
    """The activity's own check (no type checks), skipped while a ``${...}`` is left."""
    check = getattr(func, _CHECK_ATTR, None)
    if check is not None and not any(_substituted(v) for v in arguments.values()):
        check(arguments)


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
    """Type checks, then the activity's own semantic check if it has one.

    What ``gameday validate`` runs; a :func:`validated_by` activity runs the same
    on every call. Before the run, the semantic check is skipped while a value
    still holds a ``${...}`` substitution.
    """
    _check(func, getattr(func, _CHECK_ATTR, None), arguments, run_time=False)


def _check(
    func: Callable[..., Any], check: Check | None, arguments: Mapping[str, Any], *, run_time: bool
) -> None:
    check_types(inspect.unwrap(func), arguments, run_time=run_time)
    if check is None:
        return
    if not run_time and any(_substituted(v) for v in arguments.values()):
        return  # semantic checks need the substituted values: they run at run time
    check(arguments)


def _signature_problems(func: Callable[..., Any], arguments: Mapping[str, Any]) -> list[str]:
    """Unknown and missing arguments, as chaoslib's binding check would find them."""
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return []  # a builtin without a signature: chaoslib's own check judges it
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return []
    accepted = ", ".join(n for n in params if n not in _INJECTED)
    found = [
        f"unknown argument {name!r} (accepted: {accepted})"
        for name in arguments
        if name not in params
    ]
    for name, param in params.items():
        if name in _INJECTED or param.default is not inspect.Parameter.empty:
            continue
        if param.kind is not inspect.Parameter.VAR_POSITIONAL and name not in arguments:
            found.append(f"missing required argument {name!r}")
    return found


_SIGNATURE_PROBLEM = re.compile(r"^(?:unknown|missing required) argument '([^']+)'")


def _named_in(message: str, names: Mapping[str, Any]) -> str | None:
    """The argument a problem is about (``delay_seconds: ...``, ``missing required argument
    'x'``), if it names one of ``names``."""
    signature = _SIGNATURE_PROBLEM.match(message)
    head = signature.group(1) if signature else message.split(":", 1)[0].strip()
    return head if head in names else None


def argument_problems(func: Callable[..., Any], arguments: Mapping[str, Any]) -> list[str]:
    """Every problem of an activity's arguments, one message each (``gameday validate``).

    Unknown and missing arguments, every type problem, then the activity's own check,
    made to go past each problem to the next: the ``require_*`` helpers note a problem
    and go on with a stand-in value, and when the check raises about an argument, it
    runs again without that argument. One problem per argument; the check is skipped
    while a ``${...}`` substitution is left, as by :func:`semantic_check`.
    """
    found = [*_signature_problems(func, arguments), *type_problems(func, arguments)]
    names = {**_parameters(func), **arguments}
    reported = {_named_in(m, names) for m in found} - {None}
    check = getattr(func, _CHECK_ATTR, None)
    if check is None or any(_substituted(v) for v in arguments.values()):
        return found
    left_out = set(reported)
    for _ in range(len(arguments) + 1):
        given = {k: v for k, v in arguments.items() if k not in left_out}
        collected, raised = _collect(check, given)
        for message in [*collected, *([raised] if raised else [])]:
            about = _named_in(message, names)
            if about in reported or message in found:
                continue
            found.append(message)
            if about is not None:
                reported.add(about)
        about = _named_in(raised, names) if raised else None
        if about is None or about in left_out:
            break
        left_out.add(about)  # run again without it, to reach the arguments after it
    return found


def _collect(check: Check, arguments: Mapping[str, Any]) -> tuple[list[str], str | None]:
    """What ``check`` noted (``require_*``) and what it raised, if it raised."""
    collected: list[str] = []
    token = _collecting.set(collected)
    try:
        check(arguments)
    except InvalidArgument as exc:
        return collected, str(exc)
    except Exception as exc:  # noqa: BLE001 - a check that crashes is a problem to report
        return collected, f"argument check failed: {type(exc).__name__}: {exc}"
    finally:
        _collecting.reset(token)
    return collected, None


def _parameters(func: Callable[..., Any]) -> Mapping[str, Any]:
    try:
        return inspect.signature(func).parameters
    except (TypeError, ValueError):
        return {}


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_STAND_IN_CIDR = "192.0.2.1/32"  # TEST-NET-1: what a check goes on with after a bad CIDR


def require_name(label: str, value: str, *, max_len: int = 63) -> str:
    """A safe identifier (interface, namespace, container): letters, digits, ``_.-``."""
    if not isinstance(value, str) or not _NAME.match(value) or len(value) > max_len:
        return _refused(
            f"{label}: {_describe(value)} is not a valid name "
            f"(letters, digits, '_', '.', '-'; at most {max_len} characters)",
            "x",
        )
    return value


def require_range(label: str, value: float, low: float, high: float) -> float:
    """A number within [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        number = not isinstance(value, bool) and isinstance(value, int | float)
        stand_in = min(max(value, low), high) if number and math.isfinite(value) else low
        return _refused(f"{label}: {_describe(value)} is outside [{low:g}, {high:g}]", stand_in)
    return value


def require_cidrs(
    label: str, values: list[str]
) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Parse a list of CIDRs (a bare address is a /32 or /128)."""
    stand_in = [ipaddress.ip_network(_STAND_IN_CIDR)]
    if not isinstance(values, list) or not values:
        return _refused(
            f"{label}: expected a non-empty list of CIDRs, got {_describe(values)}", stand_in
        )
    nets = []
    for value in values:
        try:
            nets.append(ipaddress.ip_network(value, strict=False))
        except (TypeError, ValueError):
            _refused(f"{label}: {_describe(value)} is not a CIDR", None)
    return nets or stand_in
