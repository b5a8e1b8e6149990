"""Safety controls fail closed: checked before the run, refused at its start.

Chaos Toolkit is forgiving with controls: a control module that cannot be
imported is a warning, and a ``configure_control`` that raises is logged at
debug level; either way the experiment runs without the protection it declared.
gameday refuses instead:

* :func:`control_problems` (``gameday validate`` and ``gameday run``, before
  anything): every control declared in the experiment (top level and on
  activities) and in the Chaos Toolkit settings must import, and must pass its
  module's ``validate_control`` hook (chaos_ext's abort control loads its plan
  there: the file exists, parses, every condition and PromQL query is valid).
* :func:`resolve_control_paths`: file arguments of our controls (the abort
  control's ``plan`` and rule files: its ``resolve_paths`` hook) are resolved
  from the experiment file's directory (settings: the settings file's), so a
  run is protected the same way wherever it is launched from.
* :class:`ControlGuard` (a run-event handler): a control whose
  ``configure_control`` raised stops the run with
  :class:`~chaos_ext.errors.RunRefused` right after chaoslib configured the
  controls, before the steady-state hypothesis, so nothing is injected.

``--allow-missing-controls`` turns both refusals into loud warnings; a control
that failed to configure is then removed from the run instead of half-applied.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import logging
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from chaoslib.control import cleanup_controls, cleanup_global_controls, load_global_controls
from chaoslib.run import RunEventHandler
from chaoslib.settings import CHAOSTOOLKIT_CONFIG_PATH, load_settings

from chaos_ext.errors import ControlProblem, RunRefused

__all__ = [
    "DEFAULT_SETTINGS",
    "ControlGuard",
    "ControlProblem",
    "activate_global_controls",
    "clean_up_refused_run",
    "control_problems",
    "declared_controls",
    "load_run_settings",
    "resolve_control_paths",
    "settings_controls",
]

DEFAULT_SETTINGS = CHAOSTOOLKIT_CONFIG_PATH
logger = logging.getLogger("chaostoolkit")
# the functions chaoslib calls with a control's arguments (chaoslib.control.python)
_CONTROL_FUNCTIONS = (
    "configure_control",
    *(
        f"{when}_{level}_control"
        for level in (
            "experiment",
            "hypothesis",
            "method",
            "rollback",
            "activity",
            "loading_experiment",
        )
        for when in ("before", "after")
    ),
)
# chaoslib's debug line when a configure_control raised (chaoslib.control, 1.42-1.44)
_CONFIGURE_FAILED = re.compile(r"^Control initialization '(?P<name>.*)' failed\.")


def _activity_controls(experiment: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    hypothesis = experiment.get("steady-state-hypothesis")
    probes = hypothesis.get("probes") if isinstance(hypothesis, Mapping) else None
    sections = (
        ("steady-state-hypothesis.probes", probes),
        ("method", experiment.get("method")),
        ("rollbacks", experiment.get("rollbacks")),
    )
    for section, items in sections:
        for i, activity in enumerate(items if isinstance(items, list) else []):
            controls = activity.get("controls") if isinstance(activity, Mapping) else None
            for j, control in enumerate(controls if isinstance(controls, list) else []):
                yield f"{section}[{i}].controls[{j}]", control


def declared_controls(experiment: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """``(where, control)`` for every control of the experiment and of its activities."""
    top = experiment.get("controls")
    for i, control in enumerate(top if isinstance(top, list) else []):
        yield f"controls[{i}]", control
    yield from _activity_controls(experiment)


def settings_controls(settings: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """``(where, control)`` for every control of the Chaos Toolkit settings."""
    declared = settings.get("controls")
    for name, control in declared.items() if isinstance(declared, Mapping) else ():
        yield (
            f"controls.{name}",
            {"name": name, **control} if isinstance(control, Mapping) else control,
        )


def _module_of(control: Any) -> str:
    """The control's Python module, or ValueError saying why the declaration is unusable."""
    if not isinstance(control, Mapping):
        raise ValueError(f"expected a control object, got {control!r:.60}")
    provider = control.get("provider")
    if not isinstance(provider, Mapping) or provider.get("type") != "python":
        kind = provider.get("type") if isinstance(provider, Mapping) else provider
        raise ValueError(f"provider must be of type python, got {kind!r:.40}")
    module_name = provider.get("module")
    if not isinstance(module_name, str) or not module_name:
        raise ValueError("provider.module is missing")
    return module_name


def _problem(where: str, control: Any) -> ControlProblem | None:
    if isinstance(control, Mapping) and "ref" in control:
        return None  # a reference to a control declared at the top: checked there
    name = str(control.get("name") or "?") if isinstance(control, Mapping) else "?"
    try:
        module_name = _module_of(control)
    except ValueError as exc:
        return ControlProblem(where, name, str(exc))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - an import that crashes is as missing as one absent
        return ControlProblem(where, name, f"cannot import {module_name!r}: {exc}")
    refused = _refused_arguments(module, control) or _refused_by_control(module, control)
    return ControlProblem(where, name, f"invalid: {refused}") if refused else None


def _refused_by_control(module: Any, control: Mapping[str, Any]) -> str:
    """What the module's ``validate_control`` hook (chaoslib's) refuses, or ``""``."""
    check = getattr(module, "validate_control", None)
    if not callable(check):
        return ""
    try:
        check(copy.deepcopy(dict(control)))
    except Exception as exc:  # noqa: BLE001 - whatever the control refuses, it refuses
        return " ".join(str(exc).split()) or type(exc).__name__
    return ""


def _refused_arguments(module: Any, control: Mapping[str, Any]) -> str:
    """An argument one of the control's functions cannot take (chaoslib passes every
    argument to each of them: a TypeError at run time), or ``""``."""
    arguments = (control.get("provider") or {}).get("arguments") or {}
    if not isinstance(arguments, Mapping):
        return f"provider.arguments must be an object, got {arguments!r:.40}"
    for func_name in _CONTROL_FUNCTIONS:
        func = getattr(module, func_name, None)
        if not callable(func):
            continue
        params = inspect.signature(func).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            continue
        unknown = sorted(set(arguments) - set(params))
        if unknown:
            return f"{func_name}() takes no argument {unknown[0]!r} (it takes {', '.join(params)})"
    return ""


def control_problems(
    experiment: Mapping[str, Any] | None = None, settings: Mapping[str, Any] | None = None
) -> list[ControlProblem]:
    """Every control of an experiment, or of the settings, that would not protect the run
    (missing, invalid); touches nothing."""
    declared = [*declared_controls(experiment or {}), *settings_controls(settings or {})]
    found = [_problem(where, control) for where, control in declared]
    return [problem for problem in found if problem is not None]


def _resolve_in(control: Any, base: Path) -> None:
    provider = control.get("provider") if isinstance(control, dict) else None
    if not isinstance(provider, dict) or not isinstance(provider.get("arguments"), dict):
        return
    module_name = provider.get("module")
    if not isinstance(module_name, str) or not module_name.startswith("chaos_ext."):
        return
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return  # reported by control_problems
    resolve = getattr(module, "resolve_paths", None)
    if callable(resolve):
        resolve(provider["arguments"], base)


def resolve_control_paths(experiment: dict[str, Any], base: Path) -> None:
    """Make our controls' file arguments absolute from ``base``, in place (each control
    module's ``resolve_paths(arguments, base)`` hook knows which arguments are files)."""
    for _, control in declared_controls(experiment):
        _resolve_in(control, base)


def load_run_settings(path: str | None) -> tuple[dict[str, Any], Path | None]:
    """The Chaos Toolkit settings (``--settings``, default ``~/.chaostoolkit/settings.yaml``)
    and their file, or ``({}, None)``. File arguments of our controls declared there are
    resolved from the settings file's directory."""
    settings_path = Path(path or DEFAULT_SETTINGS).expanduser()
    if not settings_path.is_file():
        if path:
            raise FileNotFoundError(f"settings file {settings_path} does not exist")
        return {}, None
    try:  # chaoslib logs a YAML error and carries on without the settings: refuse instead
        parsed = yaml.safe_load(settings_path.read_text())
    except yaml.YAMLError as exc:
        problem = " ".join(str(exc).split())
        raise ValueError(f"settings file {settings_path}: invalid YAML: {problem}") from exc
    if parsed is not None and not isinstance(parsed, dict):
        raise ValueError(f"settings file {settings_path}: not a mapping")
    settings = load_settings(str(settings_path)) or {}
    declared = settings.get("controls")
    for control in declared.values() if isinstance(declared, Mapping) else ():
        _resolve_in(control, settings_path.parent.resolve())
    return settings, settings_path


def activate_global_controls(settings: dict[str, Any]) -> None:
    """Let chaoslib apply the settings' controls to the run (as ``chaos run`` does)."""
    load_global_controls(settings)


class _ConfigureFailures(logging.Filter):
    """Catches chaoslib's debug line for a control whose configure_control raised."""

    def __init__(self, shown_from: int, saved_level: int) -> None:
        super().__init__()
        self.shown_from = shown_from
        self.saved_level = saved_level  # the logger's own level, restored afterwards
        self.failed: list[tuple[str, str]] = []

    def filter(self, record: logging.LogRecord) -> bool:
        match = _CONFIGURE_FAILED.match(record.getMessage())
        if match:
            exc = record.exc_info[1] if record.exc_info else None
            reason = " ".join(str(exc).split()) if exc else "configure_control failed"
            self.failed.append(
                (match["name"], f"{type(exc).__name__}: {reason}" if exc else reason)
            )
        if getattr(record, "gameday_reported_by_guard", False):
            return False  # the guard's refusal line says it
        return record.levelno >= self.shown_from  # the debug we switched on stays hidden


class ControlGuard(RunEventHandler):  # type: ignore[misc]
    """Refuses the run, before the hypothesis, when a control failed to configure.

    Register it before any other handler that may refuse: ``started`` (just
    before chaoslib configures the controls) switches on the capture of
    chaoslib's debug line, ``running`` (just after) switches it off and decides.
    """

    def __init__(self, allow_missing: bool = False, warn: Any = None) -> None:
        self.allow_missing = allow_missing
        self.warn = warn or logger.warning
        self._filter: _ConfigureFailures | None = None

    def started(self, experiment: Any, journal: Any) -> None:
        for stale in [f for f in logger.filters if isinstance(f, _ConfigureFailures)]:
            logger.removeFilter(stale)  # a run that ended before `running` (Ctrl-C)
            logger.setLevel(stale.saved_level)
        self._filter = _ConfigureFailures(logger.getEffectiveLevel(), logger.level)
        logger.addFilter(self._filter)
        logger.setLevel(logging.DEBUG)

    def _stop_capture(self) -> list[tuple[str, str]]:
        if self._filter is None:
            return []
        logger.removeFilter(self._filter)
        logger.setLevel(self._filter.saved_level)
        failed, self._filter = self._filter.failed, None
        return failed

    def running(
        self,
        experiment: Any,
        journal: Any,
        configuration: Any,
        secrets: Any,
        schedule: Any,
        settings: Any,
    ) -> None:
        failed = self._stop_capture()
        if not failed:
            return
        reasons = [f"control {name!r} could not be configured: {why}" for name, why in failed]
        if not self.allow_missing:
            raise RunRefused("; ".join(reasons))
        for reason in reasons:
            self.warn(f"--allow-missing-controls: running WITHOUT it: {reason}")
        recorded = journal.setdefault("gameday", {}).setdefault("unprotected", [])
        recorded.extend(reasons)  # the report, the summary and JUnit show it; gate fails it
        names = {name for name, _ in failed}
        if isinstance(experiment.get("controls"), list):
            experiment["controls"] = [
                c for c in experiment["controls"] if c.get("name") not in names
            ]

    def finish(self, journal: Any) -> None:
        self._stop_capture()


def clean_up_refused_run(experiment: dict[str, Any]) -> None:
    """Undo what configured controls set up (chaoslib skips it when a run is refused)."""
    try:
        cleanup_controls(experiment)
    finally:
        cleanup_global_controls()
