"""Envoy overload-manager state from its Prometheus metrics. Pure.

Envoy's stats ``overload.<name>.<stat>`` reach Prometheus (``/stats/prometheus``)
as ``envoy_overload_<name with dots as underscores>_<stat>``:

* ``envoy.overload_actions.stop_accepting_requests``: ``..._active`` (0 or 1,
  1 = saturated) and ``..._scale_percent`` (0-100, scaled triggers);
* ``envoy.resource_monitors.fixed_heap``: ``..._pressure`` (percent);
* ``envoy.load_shed_points.tcp_listener_accept``: ``..._scale_percent``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["OVERLOAD_SERIES", "connections_query", "overload_query", "overload_summary"]

OVERLOAD_SERIES = re.compile(
    r"^envoy_overload_envoy_(overload_actions|resource_monitors|load_shed_points)_"
    r"(?P<name>.+)_(?P<stat>active|scale_percent|pressure)$"
)


def overload_query(matchers: str) -> str:
    """Highest value of every overload gauge across the selected Envoys, per metric name."""
    selector = matchers[1:-1] if matchers else ""
    sep = ", " if selector else ""
    return (
        'max by (__name__) ({__name__=~"envoy_overload_envoy_.+_(active|scale_percent|pressure)"'
        f"{sep}{selector}}})"
    )


def connections_query(matchers: str) -> str:
    """Active downstream HTTP connections summed over the selected Envoys."""
    return f"sum(envoy_http_downstream_cx_active{matchers})"


def overload_summary(
    values: Mapping[str, float], connections: float | None, selector: str
) -> dict[str, Any]:
    """The probe's answer from ``{metric name: value}`` and the connection count."""
    actions: dict[str, dict[str, float]] = {}
    pressure: dict[str, float] = {}
    shed: dict[str, float] = {}
    for metric, value in sorted(values.items()):
        match = OVERLOAD_SERIES.match(metric)
        if match is None:
            continue
        kind, name, stat = match.group(1), match["name"], match["stat"]
        if kind == "overload_actions" and stat in ("active", "scale_percent"):
            actions.setdefault(name, {})[stat] = value
        elif kind == "resource_monitors" and stat == "pressure":
            pressure[name] = value
        elif kind == "load_shed_points" and stat == "scale_percent":
            shed[name] = value
    active = sorted(name for name, stats in actions.items() if stats.get("active", 0) > 0)
    return {
        "selector": selector,
        "active": len(active),
        "active_actions": active,
        "stop_accepting_requests": "stop_accepting_requests" in active,
        "actions": actions,
        "pressure_percent": pressure,
        "load_shed_points": shed,
        "downstream_connections": connections,
    }
