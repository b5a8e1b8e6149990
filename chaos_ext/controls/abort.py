"""Control: continuous Prometheus abort conditions for plain ``chaos run`` (and gameday).

Declare it in an experiment; while the method runs, the conditions are checked
every ``interval_seconds`` and a breach interrupts the experiment (rollbacks still run)::

    "controls": [{
        "name": "stop-when-checkout-burns",
        "provider": {
            "type": "python",
            "module": "chaos_ext.controls.abort",
            "arguments": {
                "interval_seconds": 1,
                "unreachable_after": 3,
                "conditions": [
                    {"probe": "http-error-ratio", "parameters": {"job": "checkout"}},
                    {"probe": "http-latency-p99", "parameters": {"job": "checkout"},
                     "tolerance": {"op": "<", "threshold": 0.8}}
                ]
            }
        }
    }]

Plain ``chaos run`` skips rollbacks of an interrupted run unless told otherwise:
add ``"runtime": {"rollbacks": {"strategy": "always"}}`` to the experiment (or
run ``chaos run --rollback-strategy always``); ``gameday run`` always rolls back.

Alerting rules stop the run too: ``"alerts": {"rules": ["coredns-alerts.yaml"],
"select": ["severity=critical"], "firing": ["alertmanager"]}`` (a rule file or
PrometheusRule manifest; see docs/prometheus.md). Use
``"arguments": {"plan": "abort-plan.yaml"}`` for a plan file (the same format as
``gameday run --abort-on``; ``"plan": "edge"`` names a built-in plan).
``gameday`` resolves a relative ``plan`` and rule files from the experiment
file's directory; plain ``chaos run`` from the current directory. Prometheus is
found through the experiment's configuration (``prometheus_url`` ...) and
secrets. The journal records the plan, the checks and the verdict under
``gameday.abort``.

Fail closed: a plan that is missing or invalid is refused by ``validate_control``
(chaoslib's validation hook: ``gameday validate`` and ``chaos run`` both refuse
the experiment), and a watch that cannot start (Prometheus, or the Alertmanager
it watches, does not answer) stops the run before the steady-state hypothesis:
``gameday run`` exits 3; under ``chaos run`` the control interrupts the
experiment before it starts.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, NoReturn

from chaoslib import substitute
from chaoslib.exceptions import InterruptExecution
from chaoslib.settings import get_loaded_settings

from chaos_ext.controls.stop_conditions import (
    AbortOnBreach,
    AbortPlan,
    load_plan,
    parse_plan,
    plan_path,
    prometheus_problem,
)
from chaos_ext.errors import InvalidArgument

__all__ = [
    "before_experiment_control",
    "cleanup_control",
    "configure_control",
    "resolve_paths",
    "validate_control",
]

logger = logging.getLogger("chaostoolkit")

_PLAN_KEYS = (
    "conditions",
    "interval_seconds",
    "unreachable_after",
    "timeout_seconds",
    "probes",
    "alerts",
)
_ARGUMENT_KEYS = {"plan", *_PLAN_KEYS}
_active: list[AbortOnBreach] = []
_not_active: list[str] = []


def plan_of(arguments: dict[str, Any]) -> AbortPlan:
    """The plan the control's arguments describe (a ``plan`` file or inline conditions)."""
    extra = sorted(set(arguments) - _ARGUMENT_KEYS)
    if extra:
        raise InvalidArgument(f"unknown argument(s) {extra}; allowed: {sorted(_ARGUMENT_KEYS)}")
    if arguments.get("plan"):
        if set(arguments) & set(_PLAN_KEYS):
            raise InvalidArgument("give either 'plan' (a file) or the plan's keys, not both")
        return load_plan(plan_path(str(arguments["plan"])))
    document = {k: arguments[k] for k in _PLAN_KEYS if k in arguments}
    return parse_plan(document, "control chaos_ext.controls.abort")


def resolve_paths(arguments: dict[str, Any], base: Path) -> None:
    """Make the file arguments absolute from ``base`` (gameday: the experiment's
    directory), in place: ``plan`` (a built-in plan's name, such as ``edge``, stays a
    name unless such a file sits next to the experiment) and ``alerts.rules``."""

    def resolved(value: Any) -> Any:
        if not isinstance(value, str) or not value or "${" in value or Path(value).is_absolute():
            return value
        return str((base / value).resolve())

    plan = arguments.get("plan")
    if isinstance(plan, str) and ((base / plan).exists() or plan_path(plan) == Path(plan)):
        arguments["plan"] = resolved(plan)
    alerts = arguments.get("alerts")
    if isinstance(alerts, dict) and "rules" in alerts:
        rules = alerts["rules"]
        alerts["rules"] = (
            resolved(rules) if isinstance(rules, str) else [resolved(r) for r in rules or []]
        )


def validate_control(control: dict[str, Any]) -> None:
    """chaoslib's validation hook: the plan must exist and be valid (values with ``${...}``
    are checked when the run has them)."""
    arguments = dict((control.get("provider") or {}).get("arguments") or {})
    if "${" in repr(arguments):
        return
    plan_of(arguments)


def configure_control(
    event_registry: Any = None,
    experiment: Any = None,
    configuration: Any = None,
    secrets: Any = None,
    **arguments: Any,
) -> None:
    """Load the plan, check that Prometheus answers, register the watch with the run events."""
    _not_active.clear()
    if event_registry is None:
        _refuse("chaos_ext.controls.abort needs chaostoolkit-lib >= 1.42 (run events)")
    try:
        loaded = plan_of(substitute(arguments, configuration or {}, secrets or {}))
    except InvalidArgument as exc:  # chaoslib would swallow it: say it loudly
        _refuse(str(exc))
    problem = prometheus_problem(loaded, configuration, secrets)
    if problem is not None:
        _refuse(problem)
    strategy = ((get_loaded_settings() or {}).get("runtime") or {}).get("rollbacks") or {}
    if strategy.get("strategy", "default") != "always":
        logger.warning(
            "gameday abort control: rollbacks of an aborted run only play with the "
            "rollback strategy 'always' (experiment runtime or --rollback-strategy)"
        )
    handler = AbortOnBreach(loaded, check_on_start=False)
    event_registry.register(handler)
    _active.append(handler)


def _refuse(reason: str) -> NoReturn:
    _not_active.append(reason)
    # under gameday, ControlGuard reports it (one line); under chaos run this is the line
    logger.error(
        "gameday abort control NOT active, the run must not start: %s",
        reason,
        extra={"gameday_reported_by_guard": True},
    )
    raise InvalidArgument(reason)


def before_experiment_control(context: Any, **kwargs: Any) -> None:
    """Under plain ``chaos run``: a control that could not start interrupts the run here,
    before the steady-state hypothesis (chaoslib only logs a failed configure_control)."""
    if _not_active:
        raise InterruptExecution(f"gameday abort control not active: {_not_active[0]}")


def cleanup_control() -> None:
    """Stop every watch this control started (idempotent)."""
    _not_active.clear()
    while _active:
        _active.pop().stop()
