"""The parts of an Envoy configuration an edge audit reads. Pure.

From a ``/config_dump`` (typed ``configs`` entries, admin v3 or v2alpha):
``BootstrapConfigDump.bootstrap`` (``overload_manager``, ``admin``,
``layered_runtime``), ``ListenersConfigDump`` (``static_listeners[].listener``;
``dynamic_listeners[]`` with ``active_state`` / ``warming_state`` /
``draining_state``; the v2alpha ``dynamic_active_listeners`` /
``dynamic_warming_listeners``), ``ClustersConfigDump`` and ``RoutesConfigDump``
(route configurations by name, :mod:`._routes`). From a bootstrap:
the same bootstrap fields and ``static_resources.listeners`` / ``clusters``.

Every part keeps the path where it sits (``configs[2].dynamic_listeners[0]
.active_state.listener``) so that a report can say where a value was found.
HTTP connection managers are found in their v3 and older forms
(:mod:`._hcm`); a part that cannot be interpreted carries a ``problem`` and is
reported ``unreadable``, never ``absent``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from chaos_ext.envoy._hcm import Section, hcms_of
from chaos_ext.envoy._input import Decoded
from chaos_ext.envoy._routes import RouteConfigs, read_route_configs
from chaos_ext.envoy.errors import EnvoyError

__all__ = [
    "EdgeConfig",
    "Listener",
    "RuntimeValue",
    "Section",
    "edge_config",
    "flatten_runtime",
    "listener_label",
    "select_listeners",
]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_STATES = (("active_state", "active"), ("warming_state", "warming"), ("draining_state", "draining"))
_V2_STATES = (
    ("dynamic_active_listeners", "active"),
    ("dynamic_warming_listeners", "warming"),
    ("dynamic_draining_listeners", "draining"),
)


@dataclass(frozen=True)
class RuntimeValue:
    """One flattened runtime key of a static layer: its value and its path."""

    value: Any
    path: str


@dataclass(frozen=True)
class Listener:
    """One listener: name (None when it has none), object, HTTP connection managers."""

    name: str | None
    section: Section
    dynamic: bool
    hcms: tuple[Section, ...]
    state: str = "static"  # static | active | warming | draining
    direction: str = ""  # the listener's traffic_direction, if set

    @property
    def label(self) -> str:
        return listener_label(self)


@dataclass(frozen=True)
class EdgeConfig:
    """The parts of a configuration an edge audit reads."""

    kind: str  # config_dump | bootstrap
    bootstrap: Section
    runtime: Mapping[str, RuntimeValue]
    runtime_path: str
    listeners: tuple[Listener, ...] = ()
    clusters: tuple[Section, ...] = ()
    clusters_from_cds: bool = False  # clusters are delivered by CDS, not in this input
    listeners_from_lds: bool = False  # listeners are delivered by LDS, not in this input
    opaque_runtime_layers: tuple[str, ...] = ()  # rtds/disk layers the input does not show
    notes: tuple[str, ...] = field(default=())
    routes: RouteConfigs = field(default_factory=RouteConfigs)  # RDS route configs by name


def listener_label(listener: Listener) -> str:
    """The name, or ``(unnamed 0.0.0.0:443)`` for a listener without one."""
    if listener.name:
        return listener.name
    address = (listener.section.value.get("address") or {}).get("socket_address") or {}
    where = f"{address.get('address', '?')}:{address.get('port_value', '?')}"
    return f"(unnamed {where})"


def _key_path(parent: str, key: str) -> str:
    return f"{parent}.{key}" if _IDENT.match(key) else f"{parent}[{json.dumps(key)}]"


def flatten_runtime(layer: Mapping[str, Any], base: str) -> Iterator[tuple[str, RuntimeValue]]:
    """Dotted runtime keys of one static layer, as Envoy flattens nested objects."""
    stack: list[tuple[str, str, Mapping[str, Any]]] = [("", base, layer)]
    while stack:
        prefix, path, obj = stack.pop()
        for key, value in obj.items():
            dotted = f"{prefix}.{key}" if prefix else key
            where = _key_path(path, key)
            if isinstance(value, dict):
                stack.append((dotted, where, value))
            else:
                yield dotted, RuntimeValue(value, where)


def _runtime(bootstrap: Section) -> tuple[dict[str, RuntimeValue], str, tuple[str, ...]]:
    runtime = bootstrap.value.get("layered_runtime") or {}
    base = f"{bootstrap.path}.layered_runtime"
    flat: dict[str, RuntimeValue] = {}
    opaque: list[str] = []
    for index, layer in enumerate(runtime.get("layers") or []):
        if not isinstance(layer, dict):
            continue
        static = layer.get("static_layer")
        if isinstance(static, dict):  # later layers override earlier ones, as in Envoy
            flat.update(flatten_runtime(static, f"{base}.layers[{index}].static_layer"))
        for kind in ("rtds_layer", "disk_layer"):
            if kind in layer:
                opaque.append(f"{layer.get('name', index)} ({kind})")
    return flat, f"{base}.layers[*].static_layer", tuple(opaque)


def _listener(obj: Any, path: str, *, name: Any, dynamic: bool, state: str) -> Listener | None:
    if not isinstance(obj, dict):
        return None
    label = name or obj.get("name")
    return Listener(
        str(label) if label else None,
        Section(obj, path),
        dynamic,
        tuple(hcms_of(obj, path)),
        state,
        str(obj.get("traffic_direction") or ""),
    )


def _dump_listeners(entry: Mapping[str, Any], base: str) -> Iterator[Listener]:
    for i, item in enumerate(entry.get("static_listeners") or []):
        if isinstance(item, dict):
            path = f"{base}.static_listeners[{i}].listener"
            found = _listener(item.get("listener"), path, name=None, dynamic=False, state="static")
            if found:
                yield found
    for i, item in enumerate(entry.get("dynamic_listeners") or []):
        if not isinstance(item, dict):
            continue
        for key, state in _STATES:  # the first state present is what serves (or will)
            held = item.get(key)
            if isinstance(held, dict) and isinstance(held.get("listener"), dict):
                path = f"{base}.dynamic_listeners[{i}].{key}.listener"
                found = _listener(
                    held["listener"], path, name=item.get("name"), dynamic=True, state=state
                )
                if found:
                    yield found
                break
    for key, state in _V2_STATES:  # envoy.admin.v2alpha.ListenersConfigDump
        for i, item in enumerate(entry.get(key) or []):
            if isinstance(item, dict):
                path = f"{base}.{key}[{i}].listener"
                found = _listener(item.get("listener"), path, name=None, dynamic=True, state=state)
                if found:
                    yield found


def _clusters(items: Any, base: str, inner: str) -> Iterator[Section]:
    for i, item in enumerate(items or []):
        cluster = item.get(inner) if inner and isinstance(item, dict) else item
        if isinstance(cluster, dict):
            yield Section(cluster, f"{base}[{i}]{'.' + inner if inner else ''}")


def _entries(dump: Mapping[str, Any], suffix: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for index, entry in enumerate(dump["configs"]):
        if isinstance(entry, dict) and str(entry.get("@type", "")).endswith(suffix):
            yield index, entry


def _static_resources(boot: Section) -> tuple[list[Listener], list[Section], list[str]]:
    static = boot.value.get("static_resources") or {}
    base = f"{boot.path}.static_resources"
    notes: list[str] = []
    listeners: list[Listener] = []
    clusters: list[Section] = []
    raw_listeners, raw_clusters = static.get("listeners"), static.get("clusters")
    if isinstance(raw_listeners, dict):  # a repeated field written as one object
        raw_listeners = [raw_listeners]
        notes.append(f"{base}.listeners is an object, not a list: read as one listener")
    for i, obj in enumerate(raw_listeners or []):
        found = _listener(obj, f"{base}.listeners[{i}]", name=None, dynamic=False, state="static")
        if found:
            listeners.append(found)
    if isinstance(raw_clusters, dict):
        problem = "'clusters' is an object, not a list of clusters"
        clusters.append(Section(raw_clusters, f"{base}.clusters", problem))
    else:
        clusters.extend(_clusters(raw_clusters, f"{base}.clusters", ""))
    return listeners, clusters, notes


def _bootstrap_config(decoded: Decoded) -> EdgeConfig:
    boot = Section(decoded.data, "bootstrap")
    runtime, runtime_path, opaque = _runtime(boot)
    listeners, clusters, notes = _static_resources(boot)
    dynamic = boot.value.get("dynamic_resources") or {}
    if "cds_config" in dynamic:
        clusters = []  # upstream clusters come from CDS; static ones are control-plane plumbing
    return EdgeConfig(
        "bootstrap",
        boot,
        runtime,
        runtime_path,
        tuple(listeners),
        tuple(clusters),
        clusters_from_cds="cds_config" in dynamic,
        listeners_from_lds="lds_config" in dynamic,
        opaque_runtime_layers=opaque,
        notes=decoded.notes + tuple(notes),
    )


def _dump_config(decoded: Decoded, origin: str) -> EdgeConfig:
    dump = decoded.data
    found = next(_entries(dump, ".BootstrapConfigDump"), None)
    if found is None or not isinstance(found[1].get("bootstrap"), dict):
        raise EnvoyError(
            f"{origin}: the dump has no BootstrapConfigDump; fetch the whole /config_dump "
            "(the overload manager and runtime live there)"
        )
    boot = Section(found[1]["bootstrap"], f"configs[{found[0]}].bootstrap")
    runtime, runtime_path, opaque = _runtime(boot)
    listeners = [
        lst
        for index, entry in _entries(dump, ".ListenersConfigDump")
        for lst in _dump_listeners(entry, f"configs[{index}]")
    ]
    clusters: list[Section] = []
    notes: list[str] = []
    for index, entry in _entries(dump, ".ClustersConfigDump"):
        base = f"configs[{index}]"
        dynamic = list(
            _clusters(
                entry.get("dynamic_active_clusters"), f"{base}.dynamic_active_clusters", "cluster"
            )
        )
        static = list(_clusters(entry.get("static_clusters"), f"{base}.static_clusters", "cluster"))
        clusters.extend(dynamic or static)
        if dynamic and static:
            names = ", ".join(str(c.value.get("name")) for c in static[:5])
            notes.append(
                f"{len(static)} static cluster(s) not audited ({names}): the proxy's "
                "own upstreams (control plane, stats, tracing); a rule with "
                "bootstrap:static_resources.clusters[...] audits one"
            )
    routes = RouteConfigs(
        read_route_configs(dump["configs"]),
        in_input=next(_entries(dump, ".RoutesConfigDump"), None) is not None,
        kind="config_dump",
    )
    return EdgeConfig(
        "config_dump",
        boot,
        runtime,
        runtime_path,
        tuple(listeners),
        tuple(clusters),
        opaque_runtime_layers=opaque,
        notes=decoded.notes + tuple(notes),
        routes=routes,
    )


def edge_config(decoded: Decoded, *, origin: str) -> EdgeConfig:
    """Bootstrap, flattened static runtime, listeners and clusters of a decoded input."""
    if decoded.kind == "bootstrap":
        return _bootstrap_config(decoded)
    return _dump_config(decoded, origin)


def _inbound(listener: Listener, pod_ip: str) -> bool:
    if listener.direction == "INBOUND" or listener.name == "virtualInbound":
        return True
    address = (listener.section.value.get("address") or {}).get("socket_address") or {}
    return bool(pod_ip) and address.get("address") == pod_ip  # Istio < 1.6: <pod IP>_<port>


def select_listeners(
    config: EdgeConfig, name: str, *, origin: str, inbound: bool = False, pod_ip: str = ""
) -> tuple[Listener, ...]:
    """The listeners to audit.

    ``name`` given: that listener, by name or label (EnvoyError naming the ones
    there are if it is missing). ``inbound``: the sidecar's inbound listeners
    (``traffic_direction: INBOUND``, ``virtualInbound``, or bound to ``pod_ip``). Otherwise every
    active or warming *dynamic* listener with an HTTP connection manager (an
    Istio gateway's ``0.0.0.0_8443``, not its stats/health listeners), else every
    such static one. Draining listeners are on their way out and never chosen.
    A bootstrap whose listeners come from LDS yields none (its static listeners
    are the proxy's own plumbing, e.g. Istio's stats and health ports).
    """
    serving = [item for item in config.listeners if item.state != "draining"]
    if name:
        chosen = tuple(item for item in serving if name in (item.name, item.label))
        if not chosen:
            known = ", ".join(sorted({item.label for item in serving})) or "none"
            raise EnvoyError(f"{origin}: no listener named {name!r}; listeners: {known}")
        return chosen
    if config.kind == "bootstrap" and config.listeners_from_lds:
        return ()  # the serving listeners come from LDS; static ones here are plumbing
    http = [item for item in serving if item.hcms]
    if inbound:
        return tuple(item for item in http if _inbound(item, pod_ip))
    dynamic = tuple(item for item in http if item.dynamic)
    chosen = dynamic or tuple(http)
    if not chosen and not config.listeners_from_lds:
        raise EnvoyError(
            f"{origin}: no listener with an HTTP connection manager "
            f"({len(config.listeners)} listener(s) found); is this an HTTP edge proxy?"
        )
    return chosen
