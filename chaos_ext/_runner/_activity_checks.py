"""The checks of one activity of an experiment: refs, shape, provider and arguments.

Every check of an activity runs, whatever an earlier one found: a missing
tolerance does not hide a missing argument. A check that crashes (a third-party
function chaoslib cannot bind, a semantic check with a bug) is a problem line,
not the end of the validation.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from chaoslib import substitute
from chaoslib.activity import ensure_activity_is_valid
from chaoslib.exceptions import ChaosException
from chaoslib.hypothesis import ensure_hypothesis_tolerance_is_valid as ensure_tolerance
from chaoslib.provider.http import validate_http_activity
from chaoslib.provider.process import validate_process_activity

from chaos_ext._core.prometheus_api.promql import check_promql
from chaos_ext._core.validation import argument_problems
from chaos_ext.errors import ExperimentInvalid, InvalidArgument

__all__ = ["ExperimentInvalid", "Problems", "activities", "check_activity", "declared_names"]

_PROVIDER_FIELDS = {"python": ("module", "func"), "process": ("path",), "http": ("url",)}
_PROVIDER_CHECK: dict[str, Callable[[Any], Any]] = {
    "process": validate_process_activity,
    "http": validate_http_activity,
}
# third-party activities whose argument is a PromQL query (chaostoolkit-prometheus)
_PROMQL_ARGUMENT = {
    ("chaosprometheus.probes", "query"): "query",
    ("chaosprometheus.probes", "query_interval"): "query",
    ("chaosprometheus.probes", "compute_mean"): "query",
}
# what chaoslib checks of every activity (timeout, pauses, background) is checked
# with this stand-in provider, so that only the provider's own check is left to us
_NEUTRAL_PROVIDER = {"type": "http", "url": "http://127.0.0.1/"}


class Problems:
    """The problems of one file, in the order they were found."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.found: list[ExperimentInvalid] = []

    def add(self, where: str, message: str, *, control: bool = False) -> None:
        self.found.append(ExperimentInvalid(self.path, where, message, control=control))

    def check(self, where: str, check: Callable[[Any], Any], item: Any) -> None:
        """What chaoslib itself refuses (process paths, pauses, tolerances ...), as one
        line; a check that crashes is one line too, naming the exception."""
        try:
            check(item)
        except ChaosException as exc:
            self.add(where, " ".join(str(exc).split()))
        except Exception as exc:  # noqa: BLE001 - a crashing check is a problem of this file
            self.add(where, f"validation crashed: {type(exc).__name__}: {exc}")


def activities(experiment: Mapping[str, Any]) -> Iterator[tuple[str, Any, bool]]:
    """``(where, activity, in_hypothesis)`` for every activity of every phase."""
    hypothesis = experiment.get("steady-state-hypothesis") or {}
    if not isinstance(hypothesis, dict):
        yield "steady-state-hypothesis", hypothesis, False
    else:
        probes = hypothesis.get("probes") or []
        if not isinstance(probes, list):
            yield "steady-state-hypothesis.probes", probes, False
        else:
            for i, probe in enumerate(probes):
                yield f"steady-state-hypothesis.probes[{i}]", probe, True
    for section in ("method", "rollbacks"):
        items = experiment.get(section) or []
        if not isinstance(items, list):
            yield section, items, False
            continue
        for i, activity in enumerate(items):
            yield f"{section}[{i}]", activity, False


def declared_names(experiment: Mapping[str, Any]) -> set[str]:
    """The names a ``ref`` may point to: the hypothesis probes and the method's
    activities, what chaoslib caches for refs (``chaoslib.caching.cache_activities``)."""
    return {
        activity["name"]
        for where, activity, _ in activities(experiment)
        if not where.startswith("rollbacks")
        and isinstance(activity, dict)
        and "ref" not in activity
        and isinstance(activity.get("name"), str)
    }


def check_activity(
    problems: Problems,
    where: str,
    activity: Any,
    in_hypothesis: bool,
    configuration: Mapping[str, Any],
    declared: set[str],
) -> None:
    """Every problem of one activity (or ref) of the experiment."""
    if isinstance(activity, dict) and "ref" in activity:
        _check_ref(problems, where, activity, in_hypothesis, declared)
        return
    where = _named(where, activity)
    if not isinstance(activity, dict):
        problems.add(where, f"expected an activity object, got {activity!r:.60}")
        return
    _check_header(problems, where, activity, in_hypothesis)
    for field, problem in duration_problems(activity, configuration):
        problems.add(f"{where}.{field}", problem)
    provider = _checked_provider(problems, where, activity)
    if provider is None:
        return
    if provider["type"] != "python":
        problems.check(where, _PROVIDER_CHECK[provider["type"]], activity)
        return
    arguments = substitute(provider.get("arguments", {}), configuration, {})
    _check_python_arguments(problems, where, provider, arguments)


def _check_ref(
    problems: Problems,
    where: str,
    activity: Mapping[str, Any],
    in_hypothesis: bool,
    declared: set[str],
) -> None:
    ref = activity["ref"]
    if not isinstance(ref, str) or not ref:
        problems.add(f"{where}.ref", f"a ref is the name of an activity, got {ref!r:.60}")
    elif ref not in declared:
        known = ", ".join(repr(n) for n in sorted(declared)) or "none"
        problems.add(
            f"{where}.ref",
            f"ref {ref!r} names no activity declared in the experiment's hypothesis or "
            f"method (declared: {known})",
        )
    if in_hypothesis:  # chaoslib asks a tolerance of every hypothesis probe, refs too
        _check_tolerance(problems, where, activity)


def _check_tolerance(problems: Problems, where: str, activity: Mapping[str, Any]) -> None:
    if "tolerance" not in activity:
        problems.add(f"{where}.tolerance", "a hypothesis probe needs a tolerance")
    else:
        problems.check(f"{where}.tolerance", ensure_tolerance, activity["tolerance"])


def _check_header(
    problems: Problems, where: str, activity: Mapping[str, Any], in_hypothesis: bool
) -> None:
    """Type, name, tolerance, and what chaoslib checks of every activity."""
    if activity.get("type") not in ("action", "probe"):
        problems.add(f"{where}.type", f"must be 'action' or 'probe', got {activity.get('type')!r}")
    if not isinstance(activity.get("name"), str) or not activity["name"]:
        problems.add(f"{where}.name", "every activity needs a non-empty name")
    if in_hypothesis:
        _check_tolerance(problems, where, activity)
    neutral = {**activity, "type": "probe", "name": "-", "provider": _NEUTRAL_PROVIDER}
    problems.check(where, ensure_activity_is_valid, neutral)


def _checked_provider(
    problems: Problems, where: str, activity: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    """The provider when its fields can be looked at further, else None (problems added)."""
    provider = activity.get("provider")
    if not isinstance(provider, dict):
        problems.add(f"{where}.provider", "missing or not an object")
        return None
    kind = provider.get("type")
    if kind not in _PROVIDER_FIELDS:
        problems.add(f"{where}.provider.type", f"must be python, process or http, got {kind!r}")
        return None
    before = len(problems.found)
    for key in _PROVIDER_FIELDS[kind]:
        if not isinstance(provider.get(key), str) or not provider[key]:
            problems.add(f"{where}.provider.{key}", "missing or not a string")
    if kind == "python" and not isinstance(provider.get("arguments", {}), dict):
        problems.add(f"{where}.provider.arguments", "must be an object")
    return provider if len(problems.found) == before else None


def _named(where: str, activity: Any) -> str:
    """``probe 'p95-latency' at steady-state-hypothesis.probes[0]``: lines name the activity."""
    name = activity.get("name") if isinstance(activity, dict) else None
    if not isinstance(name, str) or not name.strip():
        return where
    kind = activity.get("type") if activity.get("type") in ("action", "probe") else "activity"
    return f"{kind} {name!r} at {where}"


def _check_python_arguments(
    problems: Problems, where: str, provider: Mapping[str, Any], arguments: Mapping[str, Any]
) -> None:
    try:
        module = importlib.import_module(provider["module"])
    except ImportError as exc:
        problems.add(f"{where}.provider.module", f"cannot import {provider['module']!r}: {exc}")
        return
    func = getattr(module, provider["func"], None)
    if not callable(func):
        problems.add(
            f"{where}.provider.func", f"{provider['module']} has no activity {provider['func']!r}"
        )
        return
    here = f"{where}.provider.arguments"
    messages = argument_problems(func, arguments)
    expr = _third_party_promql(provider, arguments)
    if expr is not None:
        messages.extend(_semantic_problems(lambda a: check_promql(expr, "query"), arguments))
    for message in messages:
        problems.add(here, message)


def _semantic_problems(
    check: Callable[[Mapping[str, Any]], Any], arguments: Mapping[str, Any]
) -> list[str]:
    try:
        check(arguments)
    except InvalidArgument as exc:
        return [str(exc)]
    except Exception as exc:  # noqa: BLE001 - a check that crashes is a problem to report
        return [f"argument check failed: {type(exc).__name__}: {exc}"]
    return []


def _third_party_promql(provider: Mapping[str, Any], arguments: Mapping[str, Any]) -> str | None:
    """The PromQL of a chaostoolkit-prometheus probe, when it is known before the run."""
    name = _PROMQL_ARGUMENT.get((provider["module"], provider["func"]))
    value = arguments.get(name) if name else None
    return value if isinstance(value, str) and "${" not in value else None


_DURATIONS = (("timeout",), ("pauses", "before"), ("pauses", "after"), ("provider", "timeout"))


def duration_problems(
    activity: Mapping[str, Any], configuration: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """``(field, problem)`` for each timeout or pause of an activity that is not a finite
    number of seconds >= 0 (NaN, an infinity, a negative number, text), checked with the
    configuration's values where it uses ``${...}``; one still unknown is left to the run.
    chaoslib accepts them, then fails the run (NaN, text) or every activity (negative)."""
    found = []
    for path in _DURATIONS:
        value: Any = activity
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if value is None:
            continue
        values = value if path[0] == "provider" and isinstance(value, list) else [value]
        for item in values:
            problem = _duration_problem(substitute(item, dict(configuration), {}))
            if problem:
                found.append((".".join(path), problem))
    return found


def _duration_problem(value: Any) -> str | None:
    if isinstance(value, str) and "${" in value:
        return None  # known only when it runs
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{value!r:.60} is not a number of seconds"
    if math.isnan(value):
        return "NaN is not a number of seconds"
    if math.isinf(value):
        return f"{value!r} is not a finite number of seconds"
    if value < 0:
        return f"{value:g} is negative: a number of seconds >= 0"
    return None
