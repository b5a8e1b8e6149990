"""Loading and validating Chaos Toolkit experiments without running anything.

Errors are :class:`ExperimentInvalid`: one line naming the file, the field
(``method[2].provider.arguments``) and what is wrong with it.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from chaoslib import substitute
from chaoslib.configuration import load_configuration
from chaoslib.exceptions import ChaosException

from chaos_ext.errors import InvalidArgument
from chaos_ext.validation import check_activity_arguments

__all__ = ["ExperimentInvalid", "load_experiment", "validate_experiment"]

_PROVIDER_FIELDS = {"python": ("module", "func"), "process": ("path",), "http": ("url",)}


class ExperimentInvalid(Exception):
    """An experiment file cannot be run as written."""

    def __init__(self, path: Path | str, where: str, message: str) -> None:
        super().__init__(f"{path}: {where}: {message}")
        self.path = str(path)
        self.where = where
        self.message = message


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
        return
    for i, probe in enumerate(hypothesis.get("probes") or []):
        yield f"steady-state-hypothesis.probes[{i}]", probe, True
    for section in ("method", "rollbacks"):
        items = experiment.get(section) or []
        if not isinstance(items, list):
            yield section, items, False
            continue
        for i, activity in enumerate(items):
            yield f"{section}[{i}]", activity, False


def _check_activity(
    path: Path, where: str, activity: Any, in_hypothesis: bool, configuration: Mapping[str, Any]
) -> None:
    if not isinstance(activity, dict):
        raise ExperimentInvalid(path, where, f"expected an activity object, got {activity!r:.60}")
    if "ref" in activity and where.startswith("method"):
        return
    if activity.get("type") not in ("action", "probe"):
        raise ExperimentInvalid(
            path, f"{where}.type", f"must be 'action' or 'probe', got {activity.get('type')!r}"
        )
    if not isinstance(activity.get("name"), str) or not activity["name"]:
        raise ExperimentInvalid(path, f"{where}.name", "every activity needs a non-empty name")
    if in_hypothesis and "tolerance" not in activity:
        raise ExperimentInvalid(path, f"{where}.tolerance", "a hypothesis probe needs a tolerance")
    provider = activity.get("provider")
    if not isinstance(provider, dict):
        raise ExperimentInvalid(path, f"{where}.provider", "missing or not an object")
    kind = provider.get("type")
    if kind not in _PROVIDER_FIELDS:
        raise ExperimentInvalid(
            path, f"{where}.provider.type", f"must be python, process or http, got {kind!r}"
        )
    for key in _PROVIDER_FIELDS[kind]:
        if not isinstance(provider.get(key), str) or not provider[key]:
            raise ExperimentInvalid(path, f"{where}.provider.{key}", "missing or not a string")
    arguments = provider.get("arguments", {})
    if kind == "python" and not isinstance(arguments, dict):
        raise ExperimentInvalid(path, f"{where}.provider.arguments", "must be an object")
    if kind == "python":
        _check_python_arguments(path, where, provider, substitute(arguments, configuration, {}))


def _check_python_arguments(
    path: Path, where: str, provider: Mapping[str, Any], arguments: Mapping[str, Any]
) -> None:
    try:
        module = importlib.import_module(provider["module"])
    except ImportError as exc:
        raise ExperimentInvalid(
            path, f"{where}.provider.module", f"cannot import {provider['module']!r}: {exc}"
        ) from exc
    func = getattr(module, provider["func"], None)
    if not callable(func):
        raise ExperimentInvalid(
            path,
            f"{where}.provider.func",
            f"{provider['module']} has no activity {provider['func']!r}",
        )
    _check_signature(path, where, func, arguments)
    try:
        check_activity_arguments(func, arguments)
    except InvalidArgument as exc:
        raise ExperimentInvalid(path, f"{where}.provider.arguments", str(exc)) from exc


def _check_signature(
    path: Path, where: str, func: Callable[..., Any], arguments: Mapping[str, Any]
) -> None:
    params = inspect.signature(func).parameters
    accepted = [n for n in params if n not in ("configuration", "secrets")]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    for name in arguments:
        if name not in params:
            raise ExperimentInvalid(
                path,
                f"{where}.provider.arguments",
                f"unknown argument {name!r} (accepted: {', '.join(accepted)})",
            )
    for name, param in params.items():
        if name in ("configuration", "secrets") or param.default is not inspect.Parameter.empty:
            continue
        if param.kind in (inspect.Parameter.VAR_POSITIONAL,):
            continue
        if name not in arguments:
            raise ExperimentInvalid(
                path, f"{where}.provider.arguments", f"missing required argument {name!r}"
            )


def _check_secrets(
    path: Path, experiment: Mapping[str, Any], secret_vars: Mapping[str, Any] | None
) -> None:
    secrets = experiment.get("secrets") or {}
    if not isinstance(secrets, dict) or not all(isinstance(v, dict) for v in secrets.values()):
        raise ExperimentInvalid(path, "secrets", "a mapping of targets to mappings of secrets")
    if secret_vars is None:
        return  # `gameday validate`: environment secrets may be set only where it runs
    from chaoslib.secret import load_secrets  # noqa: PLC0415 - heavy import

    try:
        load_secrets(copy.deepcopy(secrets), {}, copy.deepcopy(dict(secret_vars)))
    except ChaosException as exc:
        raise ExperimentInvalid(path, "secrets", str(exc)) from exc


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


def validate_experiment(
    path: Path,
    experiment: Mapping[str, Any],
    secret_vars: Mapping[str, Any] | None = None,
    config_vars: Mapping[str, Any] | None = None,
) -> None:
    """Raise ExperimentInvalid for the first problem found; touch nothing.

    Secrets are only resolved when ``secret_vars`` is given (``gameday run``):
    an environment secret may legitimately be absent where ``gameday validate`` runs.
    """
    for key in ("title", "description"):
        if not isinstance(experiment.get(key), str) or not experiment[key].strip():
            raise ExperimentInvalid(path, key, "required, a non-empty string")
    if "method" not in experiment:
        raise ExperimentInvalid(path, "method", "required (it may be an empty list)")
    configuration = _known_configuration(experiment, config_vars)
    for where, activity, in_hypothesis in _activities(experiment):
        _check_activity(path, where, activity, in_hypothesis, configuration)
    from chaoslib.experiment import ensure_experiment_is_valid  # noqa: PLC0415 - heavy import

    _check_secrets(path, experiment, secret_vars)
    try:
        ensure_experiment_is_valid({**experiment, "secrets": {}})
    except ChaosException as exc:
        raise ExperimentInvalid(path, "experiment", str(exc)) from exc
