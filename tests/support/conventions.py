"""The checker behind tests/test_conventions.py: what docs/conventions.md asks of an activity.

:func:`problems_of` looks at one activity function (its signature, resolved
annotations, declared role, docstring and source) and returns what breaks the
conventions, as sentences. It knows nothing about particular domains, so it
checks an activity added tomorrow the same way. It reads text only: that a
fault action records before it acts and returns that entry's id is checked
by running it, in :mod:`support.behaviour` (tests/test_conventions_behaviour.py).
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from chaos_ext._core.contract import LEDGER_ID, Configuration, Secrets, role_of
from chaos_ext._core.validation import is_checked

__all__ = ["activities_of", "export_problems", "problems_of", "rollback_problems"]

# A parameter is about time when one of these is a word of its name (split at "_"):
# the explicit list of time words (docs/conventions.md §1). A name made of one of them
# must end in "_seconds" and be a number.
TIME_WORDS = frozenset(
    {
        "pause",
        "sleep",
        "cooldown",
        "timeout",
        "duration",
        "wait",
        "window",
        "step",
        "hold",
        "delay",
        "jitter",
        "interval",
        "age",
        "backoff",
        "grace",
        "period",
        "keepalive",
        "refill",
        "ttl",
        "deadline",
        "latency",
        "s",
        "ms",
        "sec",
        "secs",
        "seconds",
        "minutes",
    }
)
OLD_LEDGER_KEYS = ("ledger_entry", "load_id")
_NUMBERS = {int, float}


def activities_of(module: types.ModuleType) -> list[tuple[str, Callable[..., Any]]]:
    """The activities a module exports (its ``__all__``)."""
    return [(name, getattr(module, name)) for name in getattr(module, "__all__", [])]


def _looks_like_an_activity(func: Any) -> bool:
    return inspect.isfunction(inspect.unwrap(func)) and (
        is_checked(func) or role_of(func) is not None
    )


def export_problems(module: types.ModuleType) -> list[str]:
    """Activities the module defines but leaves out of ``__all__`` (discovery reads only it)."""
    exported = set(getattr(module, "__all__", []))
    return [
        f"{module.__name__}.{name}: an activity is listed in its module's __all__"
        " (chaoslib discovers only __all__; docs/conventions.md)"
        for name, func in sorted(vars(module).items())
        if not name.startswith("_")
        and name not in exported
        and _looks_like_an_activity(func)
        and getattr(inspect.unwrap(func), "__module__", None) == module.__name__
    ]


def _is_number(hint: Any) -> bool:
    if hint in _NUMBERS:
        return True
    args = typing.get_args(hint)
    return bool(args) and all(a in _NUMBERS for a in args)


def _time_problem(name: str, hint: Any) -> str | None:
    if hint is bool or not TIME_WORDS.intersection(name.split("_")):
        return None
    if not name.endswith("_seconds"):
        return f"{name}: a time argument is named <what>_seconds (a number of seconds)"
    if not _is_number(hint):
        return f"{name}: a time argument is a number of seconds, not {hint!r}"
    return None


def _injected_problems(params: list[inspect.Parameter], hints: Mapping[str, Any]) -> list[str]:
    found = []
    last = [p.name for p in params[-2:]]
    if last != ["configuration", "secrets"]:
        found.append("configuration and secrets must be the last two arguments")
    for name, wanted in (("configuration", Configuration), ("secrets", Secrets)):
        param = next((p for p in params if p.name == name), None)
        if param is None:
            continue
        if hints.get(name) != wanted:
            found.append(
                f"{name}: typed chaos_ext._core.contract.{name.title()}, not {hints.get(name)!r}"
            )
        if param.default is not None:
            found.append(f"{name}: defaults to None")
    return found


def _signature_problems(func: Callable[..., Any]) -> list[str]:
    params = list(inspect.signature(func).parameters.values())
    hints = typing.get_type_hints(func)
    found = _injected_problems(params, hints)
    for param in params:
        problem = _time_problem(param.name, hints.get(param.name))
        if problem:
            found.append(problem)
    return found


def _source(func: Callable[..., Any]) -> str:
    return inspect.getsource(inspect.unwrap(func))


def _role_problems(name: str, func: Callable[..., Any], module: types.ModuleType) -> list[str]:
    role = role_of(func)
    if role is None:
        return [
            "an action declares its role: @fault_action(rollback=...), @rollback_activity"
            " or @remedy_action(reason=...) (chaos_ext._core.contract)"
        ]
    if role["role"] == "fault":
        return _fault_problems(name, func, module, role["rollback"])
    if role["role"] == "rollback":
        return rollback_problems(func)
    if role["role"] == "remedy" and len(role.get("reason", "")) < 10:
        return ["a remedy action says why it is not undone"]
    return []


def _fault_problems(
    name: str, func: Callable[..., Any], module: types.ModuleType, rollback: str
) -> list[str]:
    found = []
    paired = getattr(module, rollback, None)
    if rollback not in getattr(module, "__all__", []) or paired is None:
        found.append(f"its rollback activity {rollback!r} is not an activity of this module")
    elif (role_of(paired) or {}).get("role") != "rollback":
        found.append(f"{rollback!r} is not declared @rollback_activity")
    if rollback not in (func.__doc__ or ""):
        found.append(f"the docstring names the rollback activity {rollback!r}")
    source = _source(func)
    if LEDGER_ID not in source and "LEDGER_ID" not in source:
        found.append(f"returns the ledger entry id under {LEDGER_ID!r}")
    return found


def rollback_problems(func: Callable[..., Any]) -> list[str]:
    """What a rollback activity's signature breaks (scope argument, callable with no arguments)."""
    params = inspect.signature(func).parameters
    hints = typing.get_type_hints(func)
    found = []
    scope = params.get("include_dead_runs")
    if scope is None or hints.get("include_dead_runs") is not bool or scope.default is not False:
        found.append("a rollback activity takes include_dead_runs: bool = False (its scope)")
    required = [p.name for p in params.values() if p.default is inspect.Parameter.empty]
    if required:
        found.append(f"a rollback activity runs with no arguments; {required} are required")
    return found


def problems_of(
    module: types.ModuleType, name: str, func: Callable[..., Any], *, kind: str
) -> list[str]:
    """Everything ``module.name`` (an ``action`` or a ``probe``) does against the conventions."""
    if not inspect.isfunction(inspect.unwrap(func)):
        return ["an activity is a plain function"]
    found = _signature_problems(func)
    if not is_checked(func):
        found.append("an activity checks its arguments when called (@validated_by)")
    if kind == "action":
        found += _role_problems(name, func, module)
    source = _source(func)
    found += [
        f"returns {key!r}: the ledger id key is {LEDGER_ID!r}"
        for key in OLD_LEDGER_KEYS
        if re.search(rf"[\"']{key}[\"']", source)
    ]
    first = (func.__doc__ or "").strip().splitlines()
    if not first or len(first[0]) < 15:
        found.append("the docstring's first line says what it does")
    return found
