"""The routes an audited HTTP connection manager serves, and where each one sits. Pure.

An HCM names its routes in one of three ways: ``route_config`` (inline, read
where it is), ``rds.route_config_name`` (looked up in the dump's
``RoutesConfigDump``: ``dynamic_route_configs[].route_config`` and
``static_route_configs[].route_config``) or ``scoped_routes`` (SRDS, not read).
Each route that forwards (``routes[].route``, a ``RouteAction``) is a
:class:`ServedRoute`; redirects and direct responses have no upstream timeout
and are counted apart. What cannot be resolved is an :class:`Unresolved`:
``not-in-input`` when a bootstrap leaves the routes to RDS, ``unreadable``
when a dump lacks the route configuration its HCM names (never a pass).

A route's label, ``<route config> / <virtual host> / <route name or match>``
(``http.80 / *:80 / path /productpage``), is what a report names and what a
rule's ``exempt_routes`` patterns match.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from chaos_ext.envoy._hcm import Section

__all__ = [
    "RouteConfigs",
    "Served",
    "ServedRoute",
    "Unresolved",
    "match_text",
    "read_route_configs",
    "served_routes",
]

_MATCH_KEYS = ("prefix", "path", "path_separated_prefix", "safe_regex", "regex")


@dataclass(frozen=True)
class RouteConfigs:
    """The route configurations of an input, by name."""

    by_name: Mapping[str, Section] = field(default_factory=dict)
    in_input: bool = False  # the input has a RoutesConfigDump (a dump) or is a bootstrap
    kind: str = "bootstrap"  # config_dump | bootstrap


@dataclass(frozen=True)
class ServedRoute:
    """One forwarding route: its label, its RouteAction, the HCM that serves it."""

    label: str
    action: Section
    hcm: Section


@dataclass(frozen=True)
class Unresolved:
    """Routes that could not be read: what, its status, where it was looked for, why."""

    label: str
    status: str  # unreadable | not-in-input
    path: str
    note: str


@dataclass
class Served:
    """What :func:`served_routes` found."""

    routes: list[ServedRoute] = field(default_factory=list)
    unresolved: list[Unresolved] = field(default_factory=list)
    without_upstream: int = 0  # redirects, direct responses: no upstream timeout


def read_route_configs(configs: Iterable[Any]) -> dict[str, Section]:
    """Route configurations of a dump's ``RoutesConfigDump`` entries, by name."""
    found: dict[str, Section] = {}
    for index, entry in enumerate(configs):
        if not (
            isinstance(entry, dict) and str(entry.get("@type", "")).endswith(".RoutesConfigDump")
        ):
            continue
        for key in ("static_route_configs", "dynamic_route_configs"):
            for i, item in enumerate(entry.get(key) or []):
                config = item.get("route_config") if isinstance(item, dict) else None
                if isinstance(config, dict) and config.get("name"):
                    path = f"configs[{index}].{key}[{i}].route_config"
                    found.setdefault(str(config["name"]), Section(config, path))
    return found


def match_text(route: Mapping[str, Any]) -> str:
    """A route's match in words: ``prefix /static``, ``regex ^/v[0-9]+/``, ``connect``."""
    match = route.get("match")
    if not isinstance(match, dict):
        return "(no match)"
    text = "(match)"
    for key in _MATCH_KEYS:
        if key in match:
            value = match[key]
            if isinstance(value, dict):
                value = value.get("regex", value)
            text = f"{'regex' if key == 'safe_regex' else key} {value}"
            break
    else:
        if "connect_matcher" in match:
            text = "connect"
    return text + (" +headers" if match.get("headers") else "")


def _routes_of(config: Section, name: str, hcm: Section, out: Served) -> None:
    hosts = config.value.get("virtual_hosts") or []
    if not isinstance(hosts, list):
        out.unresolved.append(
            Unresolved(name, "unreadable", f"{config.path}.virtual_hosts", "not a list")
        )
        return
    for i, host in enumerate(hosts):
        if not isinstance(host, dict) or not isinstance(host.get("routes") or [], list):
            path = f"{config.path}.virtual_hosts[{i}]"
            out.unresolved.append(Unresolved(name, "unreadable", path, "routes is not a list"))
            continue
        for j, route in enumerate(host.get("routes") or []):
            path = f"{config.path}.virtual_hosts[{i}].routes[{j}]"
            if not isinstance(route, dict):
                continue
            label = f"{name} / {host.get('name', i)} / {route.get('name') or match_text(route)}"
            action = route.get("route")
            if action is None:
                out.without_upstream += 1
            elif isinstance(action, dict):
                out.routes.append(ServedRoute(label, Section(action, f"{path}.route"), hcm))
            else:
                problem = f"route is a {type(action).__name__}, not a RouteAction"
                out.routes.append(ServedRoute(label, Section({}, f"{path}.route", problem), hcm))


def _resolve(listener: str, hcm: Section, configs: RouteConfigs, out: Served) -> None:
    value = hcm.value
    if hcm.problem:
        out.unresolved.append(Unresolved(listener, "unreadable", hcm.path, hcm.problem))
    elif isinstance(value.get("route_config"), dict):
        inline = value["route_config"]
        name = str(inline.get("name") or f"(inline route_config of {listener})")
        _routes_of(Section(inline, f"{hcm.path}.route_config"), name, hcm, out)
    elif isinstance(value.get("rds"), dict):
        name = str(value["rds"].get("route_config_name", ""))
        found = configs.by_name.get(name)
        if found is not None:
            _routes_of(found, name, hcm, out)
            return
        path = f"{hcm.path}.rds.route_config_name"
        if configs.kind == "bootstrap":
            note = f"route config {name!r} comes from RDS at run time: audit the live /config_dump"
            out.unresolved.append(Unresolved(name, "not-in-input", path, note))
        elif not configs.in_input:
            note = (
                f"route config {name!r}: the dump has no RoutesConfigDump; fetch the whole "
                "/config_dump (no ?resource= or ?mask=)"
            )
            out.unresolved.append(Unresolved(name, "unreadable", path, note))
        else:
            note = (
                f"route config {name!r} is not in the dump's RoutesConfigDump (RDS not received?)"
            )
            out.unresolved.append(Unresolved(name, "unreadable", path, note))
    elif "scoped_routes" in value:
        note = "scoped routes (scoped_routes, SRDS) are not read by this audit"
        out.unresolved.append(Unresolved(listener, "unreadable", f"{hcm.path}.scoped_routes", note))
    else:
        note = "the HTTP connection manager has no route_config, rds or scoped_routes"
        out.unresolved.append(Unresolved(listener, "unreadable", hcm.path, note))


def served_routes(hcms: Iterable[tuple[str, Section]], configs: RouteConfigs) -> Served:
    """Every forwarding route of the given (listener label, HCM) pairs."""
    out = Served()
    for listener, hcm in hcms:
        _resolve(listener, hcm, configs, out)
    return out
