"""Loading and validating Chaos Toolkit experiments without running anything.

Errors are :class:`ExperimentInvalid`: one line naming the file, the field
(``method[2].provider.arguments``) and what is wrong with it.
:func:`experiment_problems` finds all of them (every activity, every argument);
:func:`validate_experiment` raises the first.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from chaoslib import substitute
from chaoslib.activity import ensure_activity_is_valid
from chaoslib.configuration import load_configuration
from chaoslib.exceptions import ChaosException
from chaoslib.hypothesis import ensure_hypothesis_tolerance_is_valid as ensure_tolerance

from chaos_ext._prometheus.promql import check_promql
from chaos_ext.errors import InvalidArgument
from chaos_ext.runner.controls import control_problems
from chaos_ext.validation import semantic_check, type_problems

__all__ = ["ExperimentInvalid", "experiment_problems", "load_experiment", "validate_experiment"]

_PROVIDER_FIELDS = {"python": ("module", "func"), "process": ("path",), "http": ("url",)}
# third-party activities whose argument is a PromQL query (chaostoolkit-prometheus)
_PROMQL_ARGUMENT = {
    ("chaosprometheus.probes", "query"): "query",
    ("chaosprometheus.probes", "query_interval"): "query",
    ("chaosprometheus.probes", "compute_mean"): "query",
}


class ExperimentInvalid(Exception):
    """An experiment file cannot be run as written."""

    def __init__(
        self, path: Path | str, where: str, message: str, *, control: bool = False
    ) -> None:
        super().__init__(f"{path}: {where}: {message}")
        self.path = str(path)
        self.where = where
        self.message = message
        self.control = control  # a safety control that would not protect the run


def load_experiment(path: Path) -> dict[str, Any]:
    """Parse a JSON or YAML experiment file into a dict."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ExperimentInvalid(path, "file", exc.strerror or str(exc)) from exc
    try:
        if path.suffix.lower() in {".yaml", ".yml"}:
            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExperimentInvalid(path, f"line {exc.lineno}", f"invalid JSON: {exc.msg}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "file"
        problem = getattr(exc, "problem", None) or str(exc)
        raise ExperimentInvalid(path, where, f"invalid YAML: {problem}") from exc
    if not isinstance(data, dict):
        raise ExperimentInvalid(path, "document", "an experiment is a mapping (JSON object)")
    return data


def _activities(experiment: Mapping[str, Any]) -> Iterator[tuple[str, Any, bool]]:
    hypothesis = experiment.get("steady-state-hypothesis") or {}
    if not isinstance(hypothesis, dict):
        yield "steady-state-hypothesis", hypothesis, False
    else:
        for i, probe in enumerate(hypothesis.get("probes") or []):
            yield f"steady-state-hypothesis.probes[{i}]", probe, True
    for section in ("method", "rollbacks"):
        items = experiment.get(section) or []
        if not isinstance(items, list):
            yield section, items, False
            continue
        for i, activity in enumerate(items):
            yield f"{section}[{i}]", activity, False


class _Problems:
    """The problems of one file, in the order they were found."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.found: list[ExperimentInvalid] = []

    def add(self, where: str, message: str, *, control: bool = False) -> None:
        self.found.append(ExperimentInvalid(self.path, where, message, control=control))


def _activity_shape(problems: _Problems, where: str, activity: Any, in_hypothesis: bool) -> bool:
    """Type, name, tolerance and provider fields; True when the provider can be looked at."""
    if not isinstance(activity, dict):
        problems.add(where, f"expected an activity object, got {activity!r:.60}")
        return False
    before = len(problems.found)
    if activity.get("type") not in ("action", "probe"):
        problems.add(f"{where}.type", f"must be 'action' or 'probe', got {activity.get('type')!r}")
    if not isinstance(activity.get("name"), str) or not activity["name"]:
        problems.add(f"{where}.name", "every activity needs a non-empty name")
    if in_hypothesis and "tolerance" not in activity:
        problems.add(f"{where}.tolerance", "a hypothesis probe needs a tolerance")
    elif in_hypothesis:
        _chaoslib_check(problems, f"{where}.tolerance", ensure_tolerance, activity["tolerance"])
    provider = activity.get("provider")
    if not isinstance(provider, dict):
        problems.add(f"{where}.provider", "missing or not an object")
        return False
    kind = provider.get("type")
    if kind not in _PROVIDER_FIELDS:
        problems.add(f"{where}.provider.type", f"must be python, process or http, got {kind!r}")
        return False
    for key in _PROVIDER_FIELDS[kind]:
        if not isinstance(provider.get(key), str) or not provider[key]:
            problems.add(f"{where}.provider.{key}", "missing or not a string")
    if kind == "python" and not isinstance(provider.get("arguments", {}), dict):
        problems.add(f"{where}.provider.arguments", "must be an object")
    return len(problems.found) == before


def _named(where: str, activity: Any) -> str:
    """``probe 'p95-latency' at steady-state-hypothesis.probes[0]``: lines name the activity."""
    name = activity.get("name") if isinstance(activity, dict) else None
    if not isinstance(name, str) or not name.strip():
        return where
    kind = activity.get("type") if activity.get("type") in ("action", "probe") else "activity"
    return f"{kind} {name!r} at {where}"


def _check_activity(
    problems: _Problems, where: str, activity: Any, in_hypothesis: bool,
    configuration: Mapping[str, Any],
) -> None:  # fmt: skip
    if isinstance(activity, dict) and "ref" in activity and where.startswith("method"):
        return
    where = _named(where, activity)
    if not _activity_shape(problems, where, activity, in_hypothesis):
        return
    provider = activity["provider"]
    if provider["type"] != "python":
        _chaoslib_check(problems, where, ensure_activity_is_valid, activity)
        return
    arguments = substitute(provider.get("arguments", {}), configuration, {})
    _check_python_arguments(problems, where, provider, arguments)


def _chaoslib_check(
    problems: _Problems, where: str, check: Callable[[Any], Any], item: Any
) -> None:
    """What chaoslib itself refuses (process paths, pauses, tolerances ...), as one line."""
    try:
        check(item)
    except ChaosException as exc:
        problems.add(where, " ".join(str(exc).split()))


def _check_python_arguments(
    problems: _Problems, where: str, provider: Mapping[str, Any], arguments: Mapping[str, Any]
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
    messages = [*_signature_problems(func, arguments), *type_problems(func, arguments)]
    if not messages:
        messages = _semantic_problems(partial(semantic_check, func), arguments)
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


def _signature_problems(func: Callable[..., Any], arguments: Mapping[str, Any]) -> list[str]:
    params = inspect.signature(func).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return []
    accepted = ", ".join(n for n in params if n not in ("configuration", "secrets"))
    found = [
        f"unknown argument {name!r} (accepted: {accepted})"
        for name in arguments
        if name not in params
    ]
    for name, param in params.items():
        if name in ("configuration", "secrets") or param.default is not inspect.Parameter.empty:
            continue
        if param.kind is not inspect.Parameter.VAR_POSITIONAL and name not in arguments:
            found.append(f"missing required argument {name!r}")
    return found


def _check_secrets(
    problems: _Problems, experiment: Mapping[str, Any], secret_vars: Mapping[str, Any] | None
) -> None:
    secrets = experiment.get("secrets") or {}
    if not isinstance(secrets, dict) or not all(isinstance(v, dict) for v in secrets.values()):
        problems.add("secrets", "a mapping of targets to mappings of secrets")
        return
    if secret_vars is None:
        return  # `gameday validate`: environment secrets may be set only where it runs
    from chaoslib.secret import load_secrets  # noqa: PLC0415 - heavy import

    try:
        load_secrets(copy.deepcopy(secrets), {}, copy.deepcopy(dict(secret_vars)))
    except ChaosException as exc:
        problems.add("secrets", str(exc))


def _known_configuration(
    experiment: Mapping[str, Any], config_vars: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The experiment's configuration as far as it resolves here, so that arguments
    like ``${service_job}`` are checked with their values; unresolved ones are skipped."""
    declared = experiment.get("configuration") or {}
    known: dict[str, Any] = {}
    for key, value in declared.items() if isinstance(declared, dict) else ():
        try:
            known.update(load_configuration({key: value}, dict(config_vars or {})))
        except ChaosException:
            continue  # an environment value that is only set where it runs
    return known


def experiment_problems(
    path: Path,
    experiment: Mapping[str, Any],
    secret_vars: Mapping[str, Any] | None = None,
    config_vars: Mapping[str, Any] | None = None,
) -> list[ExperimentInvalid]:
    """Every problem of an experiment, one :class:`ExperimentInvalid` each; touches nothing.

    Secrets are only resolved when ``secret_vars`` is given (``gameday run``):
    an environment secret may legitimately be absent where ``gameday validate`` runs.
    """
    problems = _Problems(path)
    for key in ("title", "description"):
        if not isinstance(experiment.get(key), str) or not experiment[key].strip():
            problems.add(key, "required, a non-empty string")
    if "method" not in experiment:
        problems.add("method", "required (it may be an empty list)")
    configuration = _known_configuration(experiment, config_vars)
    for where, activity, in_hypothesis in _activities(experiment):
        _check_activity(problems, where, activity, in_hypothesis, configuration)
    _check_secrets(problems, experiment, secret_vars)
    if secret_vars is not None:  # `gameday run`: every configuration value must resolve
        _chaoslib_check(
            problems, "configuration",
            lambda declared: load_configuration(declared, dict(config_vars or {})),
            copy.deepcopy(experiment.get("configuration") or {}),
        )  # fmt: skip
    for problem in control_problems(experiment):
        problems.add(problem.where, f"control {problem.name!r}: {problem.reason}", control=True)
    if not problems.found:  # what only chaoslib checks (references, tags, extensions ...)
        from chaoslib.experiment import ensure_experiment_is_valid  # noqa: PLC0415 - heavy

        # configuration and secrets were checked above, as far as they resolve here
        plain = {**experiment, "secrets": {}, "configuration": {}}
        _chaoslib_check(problems, "experiment", ensure_experiment_is_valid, plain)
    return problems.found


def validate_experiment(
    path: Path,
    experiment: Mapping[str, Any],
    secret_vars: Mapping[str, Any] | None = None,
    config_vars: Mapping[str, Any] | None = None,
) -> None:
    """Raise ExperimentInvalid for the first problem :func:`experiment_problems` finds."""
    problems = experiment_problems(path, experiment, secret_vars, config_vars)
    if problems:
        raise problems[0]
