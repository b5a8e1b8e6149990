"""Control: continuous Prometheus abort conditions for plain ``chaos run`` (and gameday).

Declare it in an experiment; while the method runs, the conditions are checked
every ``interval`` and a breach interrupts the experiment (rollbacks still run)::

    "controls": [{
        "name": "stop-when-checkout-burns",
        "provider": {
            "type": "python",
            "module": "chaos_ext.controls.abort",
            "arguments": {
                "interval": "1s",
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
``"arguments": {"plan": "abort-plan.yaml"}`` for a plan file (the same
format as ``gameday run --abort-on``; ``"plan": "edge"`` names a built-in
plan). Prometheus is found through the experiment's configuration
(``prometheus_url`` ...) and secrets. The journal records the plan, the
checks and the verdict under ``gameday.abort``.
"""

from __future__ import annotations

import logging
from typing import Any

from chaoslib.settings import get_loaded_settings

from chaos_ext.errors import InvalidArgument
from chaos_ext.prometheus._abort import load_plan, parse_plan, plan_path
from chaos_ext.prometheus.abort import AbortOnBreach

__all__ = ["cleanup_control", "configure_control"]

logger = logging.getLogger("chaostoolkit")

_PLAN_KEYS = ("conditions", "interval", "unreachable_after", "timeout", "probes", "alerts")
_active: list[AbortOnBreach] = []


def configure_control(
    plan: str = "", event_registry: Any = None, experiment: Any = None, **arguments: Any
) -> None:
    """Load the plan and register the watch with chaoslib's run events."""
    if event_registry is None:
        logger.error("chaos_ext.controls.abort needs chaostoolkit-lib >= 1.42 (run events)")
        return
    try:
        if plan:
            loaded = load_plan(plan_path(plan))
        else:
            document = {k: arguments[k] for k in _PLAN_KEYS if k in arguments}
            loaded = parse_plan(document, "control chaos_ext.controls.abort")
    except InvalidArgument as exc:  # chaoslib would swallow it: say it loudly
        logger.error("gameday abort control NOT active, the run is unprotected: %s", exc)
        raise
    strategy = ((get_loaded_settings() or {}).get("runtime") or {}).get("rollbacks") or {}
    if strategy.get("strategy", "default") != "always":
        logger.warning(
            "gameday abort control: rollbacks of an aborted run only play with the "
            "rollback strategy 'always' (experiment runtime or --rollback-strategy)"
        )
    handler = AbortOnBreach(loaded)
    event_registry.register(handler)
    _active.append(handler)


def cleanup_control() -> None:
    """Stop every watch this control started (idempotent)."""
    while _active:
        _active.pop().stop()
