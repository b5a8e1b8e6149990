"""Loading and validating Chaos Toolkit experiments without running anything.

Errors are :class:`ExperimentInvalid`: one line naming the file, the field
(``method[2].provider.arguments``) and what is wrong with it.
:func:`experiment_problems` finds all of them (every activity, every argument);
:func:`validate_experiment` raises the first.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from chaoslib.configuration import load_configuration
from chaoslib.exceptions import ChaosException

from chaos_ext._core.prometheus_api.promql import validating
from chaos_ext._core.prometheus_api.promql_versions import Target, promql_target
from chaos_ext._core.prometheus_api.server_judge import server_judge
from chaos_ext._runner._activity_checks import (
    ExperimentInvalid,
    Problems,
    activities,
    check_activity,
    declared_names,
)
from chaos_ext._runner._foreign import foreign_format
from chaos_ext._runner._input import parse_documents, read_text
from chaos_ext._runner.control_checks import control_problems, resolve_control_paths
from chaos_ext.errors import InvalidArgument

__all__ = [
    "ExperimentInvalid",
    "Resolve",
    "experiment_problems",
    "file_problems",
    "load_experiment",
    "validate_experiment",
]


Resolve = Literal["all", "configuration", "nothing"]


def load_experiment(path: Path) -> dict[str, Any]:
    """Parse a JSON or YAML experiment file into a dict, within the input limits.

    Only a regular UTF-8 file of at most 4 MiB is read, nested at most 64 levels,
    its YAML aliases expanding to at most 100,000 values (``_runner._input``). A
    file of another tool (Chaos Mesh, Litmus, Krkn, a journal...) is named as such
    (``_runner._foreign``), and so is a YAML file of several documents.
    """
    text = read_text(path)
    try:
        documents = parse_documents(path, text, as_yaml=path.suffix.lower() in {".yaml", ".yml"})
    except json.JSONDecodeError as exc:
        raise ExperimentInvalid(path, f"line {exc.lineno}", f"invalid JSON: {exc.msg}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "file"
        problem = getattr(exc, "problem", None) or str(exc)
        raise ExperimentInvalid(path, where, f"invalid YAML: {problem}") from exc
    foreign = foreign_format(documents)
    if foreign is not None:
        raise ExperimentInvalid(path, "format", foreign)
    if len(documents) > 1:
        raise ExperimentInvalid(
            path,
            "format",
            f"multi-document YAML ({len(documents)} documents separated by ---): an experiment "
            "is one document; put each experiment in its own file",
        )
    if not documents:
        raise ExperimentInvalid(path, "document", "the file is empty; an experiment is a mapping")
    data = documents[0]
    if not isinstance(data, dict):
        raise ExperimentInvalid(path, "document", "an experiment is a mapping (JSON object)")
    return data


def _check_secrets(
    problems: Problems,
    experiment: Mapping[str, Any],
    secret_vars: Mapping[str, Any] | None,
    *,
    resolve: Resolve,
) -> None:
    secrets = experiment.get("secrets") or {}
    if not isinstance(secrets, dict) or not all(isinstance(v, dict) for v in secrets.values()):
        problems.add("secrets", "a mapping of targets to mappings of secrets")
        return
    if resolve != "all":
        return  # validate, schedule: environment secrets may be set only where it runs
    from chaoslib.secret import load_secrets  # noqa: PLC0415 - heavy import

    try:
        load_secrets(copy.deepcopy(secrets), {}, copy.deepcopy(dict(secret_vars or {})))
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
    *,
    resolve: Resolve = "all",
) -> list[ExperimentInvalid]:
    """Every problem of an experiment, one :class:`ExperimentInvalid` each; touches nothing.

    ``resolve`` says what is resolved from the environment and ``config_vars`` /
    ``secret_vars`` (``--var``, ``--var-file``), as the run resolves it:

    * ``"all"`` (``gameday run``): configuration and secrets;
    * ``"configuration"`` (``gameday validate``): the configuration, so that an
      environment key that is not set is refused as by the run and by
      ``chaos validate``; secrets only by shape, since they are often set only
      where the run happens (a CI job, a CronJob's Secret);
    * ``"nothing"`` (``gameday schedule``: it runs in the cluster).
    """
    problems = Problems(path)
    try:
        with _promql_judge(problems, experiment, config_vars):
            _find_problems(problems, experiment, secret_vars, config_vars, resolve=resolve)
    except Exception as exc:  # noqa: BLE001 - a crash is a problem of this file, not of all
        problems.add("validation", f"crashed: {type(exc).__name__}: {exc}")
    return problems.found


def _given(experiment: Mapping[str, Any], config_vars: Mapping[str, Any] | None, key: str) -> Any:
    """``key`` as someone gave it for this run: ``--var`` / ``--var-file``, the value written
    in the experiment, or its environment variable when set (not its default)."""
    declared = experiment.get("configuration") or {}
    value = (config_vars or {}).get(key, declared.get(key) if isinstance(declared, dict) else None)
    if isinstance(value, dict) and value.get("type") == "env":
        value = os.environ.get(str(value.get("key")))
    return value


def _given_prometheus_url(
    experiment: Mapping[str, Any], config_vars: Mapping[str, Any] | None
) -> str | None:
    """The Prometheus URL someone gave for this run (:func:`_given`). Not an environment
    default: that is often a sandbox address or a cluster-only name, which validation
    must not go looking for."""
    for key in ("prometheus_url", "prometheus_base_url"):
        value = _given(experiment, config_vars, key)
        if isinstance(value, str) and value.startswith(("http://", "https://")):
            return value
    return None


def _promql_judge(
    problems: Problems, experiment: Mapping[str, Any], config_vars: Mapping[str, Any] | None
) -> contextlib.AbstractContextManager[None]:
    """PromQL checked as before a run: judged by the experiment's Prometheus when its URL
    is given (:func:`_given_prometheus_url`), else offline with promtool's help
    (``_prometheus.promql.validating``); offline, for the target version: the server's
    buildinfo, else ``prometheus_version``, else unknown."""
    try:
        configured = promql_target(
            {"prometheus_version": _given(experiment, config_vars, "prometheus_version")}
        )
    except InvalidArgument as exc:
        problems.add("configuration.prometheus_version", str(exc))
        configured = None
    url = _given_prometheus_url(experiment, config_vars)
    if not url:
        return validating(target=configured)
    server = server_judge(url)
    said = f"Prometheus {server.version} at {url.rstrip('/')} (its buildinfo)"
    built = Target.parse(server.version, said) if server.version else None
    return validating((server.name, server.judge), target=built or configured)


def _check_header(problems: Problems, experiment: Mapping[str, Any]) -> None:
    """The hypothesis title and the tags, which chaoslib would report one at a time."""
    hypothesis = experiment.get("steady-state-hypothesis")
    if isinstance(hypothesis, dict) and not hypothesis.get("title"):
        problems.add("steady-state-hypothesis.title", "required, a non-empty string")
    tags = experiment.get("tags")
    if tags and (not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags)):
        problems.add("tags", "a list of non-empty strings")


def _find_problems(
    problems: Problems,
    experiment: Mapping[str, Any],
    secret_vars: Mapping[str, Any] | None,
    config_vars: Mapping[str, Any] | None,
    *,
    resolve: Resolve,
) -> None:
    for key in ("title", "description"):
        if not isinstance(experiment.get(key), str) or not experiment[key].strip():
            problems.add(key, "required, a non-empty string")
    if "method" not in experiment:
        problems.add("method", "required (it may be an empty list)")
    _check_header(problems, experiment)
    configuration = _known_configuration(experiment, config_vars)
    declared = declared_names(experiment)
    for where, activity, in_hypothesis in activities(experiment):
        check_activity(problems, where, activity, in_hypothesis, configuration, declared)
    _check_secrets(problems, experiment, secret_vars, resolve=resolve)
    if resolve != "nothing":  # every configuration value must resolve, as when it runs
        problems.check(
            "configuration",
            lambda declared: load_configuration(declared, dict(config_vars or {})),
            copy.deepcopy(experiment.get("configuration") or {}),
        )
    for problem in control_problems(experiment):
        problems.add(problem.where, f"control {problem.name!r}: {problem.reason}", control=True)
    if not problems.found:  # what only chaoslib checks (tags, extensions, binding ...)
        from chaoslib.experiment import ensure_experiment_is_valid  # noqa: PLC0415 - heavy

        # configuration and secrets were checked above, with the run's variables
        plain = {**experiment, "secrets": {}, "configuration": {}}
        problems.check("experiment", ensure_experiment_is_valid, plain)


def file_problems(
    path: Path,
    secret_vars: Mapping[str, Any] | None = None,
    config_vars: Mapping[str, Any] | None = None,
    *,
    resolve: Resolve = "all",
) -> tuple[dict[str, Any] | None, list[ExperimentInvalid]]:
    """Load one file and find every problem: ``(experiment or None, problems)``.

    Our controls' file arguments are resolved from the file's directory. Whatever
    goes wrong is a problem of this file: the caller goes on with the next one.
    """
    try:
        experiment = load_experiment(path)
        resolve_control_paths(experiment, path.resolve().parent)
    except ExperimentInvalid as exc:
        return None, [exc]
    except Exception as exc:  # noqa: BLE001 - one file's crash must not hide the others
        return None, [ExperimentInvalid(path, "file", f"crashed: {type(exc).__name__}: {exc}")]
    return experiment, experiment_problems(
        path, experiment, secret_vars, config_vars, resolve=resolve
    )


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
