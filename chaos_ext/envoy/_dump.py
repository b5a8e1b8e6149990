"""Parse an Envoy v3 admin ``/config_dump`` into the parts an edge audit reads.

Pure functions on JSON. The dump is ``{"configs": [...]}``, each entry typed by
``@type``:

* ``envoy.admin.v3.BootstrapConfigDump``: ``bootstrap`` holds
  ``overload_manager`` and ``layered_runtime`` (static layers);
* ``envoy.admin.v3.ListenersConfigDump``: ``static_listeners[].listener`` and
  ``dynamic_listeners[].active_state.listener``; the HTTP connection manager is
  a ``filter_chains[].filters[].typed_config`` (also in ``default_filter_chain``)
  with the ``HttpConnectionManager`` ``@type``.

Every part keeps the path where it sits in the dump
(``configs[2].dynamic_listeners[0].active_state.listener``) so that a report can
say where a value was found.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from chaos_ext.errors import EnvoyError

__all__ = [
    "BOOTSTRAP_TYPE",
    "HCM_TYPE",
    "LISTENERS_TYPE",
    "EdgeConfig",
    "Listener",
    "RuntimeValue",
    "Section",
    "edge_config",
    "flatten_runtime",
    "parse_config_dump",
    "select_listeners",
]

_ADMIN = "type.googleapis.com/envoy.admin.v3."
BOOTSTRAP_TYPE = _ADMIN + "BootstrapConfigDump"
LISTENERS_TYPE = _ADMIN + "ListenersConfigDump"
HCM_TYPE = (
    "type.googleapis.com/envoy.extensions.filters.network."
    "http_connection_manager.v3.HttpConnectionManager"
)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Section:
    """A JSON object of the dump and the path where it sits."""

    value: Mapping[str, Any]
    path: str


@dataclass(frozen=True)
class RuntimeValue:
    """One flattened runtime key of a static layer: its value and its path."""

    value: Any
    path: str


@dataclass(frozen=True)
class Listener:
    """One listener: its name, its object and the HTTP connection managers in it."""

    name: str
    section: Section
    dynamic: bool
    hcms: tuple[Section, ...]


@dataclass(frozen=True)
class EdgeConfig:
    """The parts of a dump an edge audit reads."""

    bootstrap: Section
    runtime: Mapping[str, RuntimeValue]
    runtime_path: str
    listeners: tuple[Listener, ...] = field(default=())


def parse_config_dump(raw: bytes | str, *, origin: str) -> dict[str, Any]:
    """Decode a ``/config_dump`` body; EnvoyError quoting ``origin`` when it is not one."""
    try:
        dump = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise EnvoyError(
            f"{origin}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "expected the body of Envoy's /config_dump"
        ) from None
    except UnicodeDecodeError as exc:
        raise EnvoyError(f"{origin}: not UTF-8 text ({exc.reason}); expected JSON") from None
    if not isinstance(dump, dict) or not isinstance(dump.get("configs"), list):
        raise EnvoyError(
            f"{origin}: JSON without a 'configs' list: not an Envoy v3 /config_dump "
            "(fetch the whole dump, without ?resource= or ?mask=)"
        )
    return dump


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


def _find_config(dump: Mapping[str, Any], type_url: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for index, entry in enumerate(dump["configs"]):
        if isinstance(entry, dict) and entry.get("@type") == type_url:
            yield index, entry


def _runtime(bootstrap: Section) -> tuple[dict[str, RuntimeValue], str]:
    runtime = bootstrap.value.get("layered_runtime") or {}
    base = f"{bootstrap.path}.layered_runtime"
    flat: dict[str, RuntimeValue] = {}
    for index, layer in enumerate(runtime.get("layers") or []):
        static = layer.get("static_layer") if isinstance(layer, dict) else None
        if isinstance(static, dict):  # later layers override earlier ones, as in Envoy
            flat.update(flatten_runtime(static, f"{base}.layers[{index}].static_layer"))
    return flat, f"{base}.layers[*].static_layer"


def _hcms(listener: Mapping[str, Any], path: str) -> Iterator[Section]:
    chains = [
        (f"{path}.filter_chains[{i}]", chain)
        for i, chain in enumerate(listener.get("filter_chains") or [])
    ]
    if isinstance(listener.get("default_filter_chain"), dict):
        chains.append((f"{path}.default_filter_chain", listener["default_filter_chain"]))
    for chain_path, chain in chains:
        for j, net_filter in enumerate(chain.get("filters") or []):
            typed = net_filter.get("typed_config") if isinstance(net_filter, dict) else None
            if isinstance(typed, dict) and typed.get("@type") == HCM_TYPE:
                yield Section(typed, f"{chain_path}.filters[{j}].typed_config")


def _listeners(dump: Mapping[str, Any]) -> Iterator[Listener]:
    for index, entry in _find_config(dump, LISTENERS_TYPE):
        base = f"configs[{index}]"
        for i, item in enumerate(entry.get("static_listeners") or []):
            listener = item.get("listener")
            if isinstance(listener, dict):
                path = f"{base}.static_listeners[{i}].listener"
                name = str(listener.get("name", f"static_{i}"))
                yield Listener(name, Section(listener, path), False, tuple(_hcms(listener, path)))
        for i, item in enumerate(entry.get("dynamic_listeners") or []):
            listener = (item.get("active_state") or {}).get("listener")
            if isinstance(listener, dict):  # warming/draining-only listeners serve no traffic
                path = f"{base}.dynamic_listeners[{i}].active_state.listener"
                name = str(item.get("name") or listener.get("name", ""))
                yield Listener(name, Section(listener, path), True, tuple(_hcms(listener, path)))


def edge_config(dump: Mapping[str, Any], *, origin: str) -> EdgeConfig:
    """Bootstrap, flattened static runtime and listeners of a parsed dump."""
    found = next(_find_config(dump, BOOTSTRAP_TYPE), None)
    if found is None or not isinstance(found[1].get("bootstrap"), dict):
        raise EnvoyError(
            f"{origin}: the dump has no {BOOTSTRAP_TYPE.rsplit('.', 1)[-1]}; "
            "fetch the whole /config_dump (the overload manager and runtime live there)"
        )
    bootstrap = Section(found[1]["bootstrap"], f"configs[{found[0]}].bootstrap")
    runtime, runtime_path = _runtime(bootstrap)
    return EdgeConfig(bootstrap, runtime, runtime_path, tuple(_listeners(dump)))


def select_listeners(config: EdgeConfig, name: str, *, origin: str) -> tuple[Listener, ...]:
    """The listeners to audit.

    ``name`` given: that listener (EnvoyError naming the ones there are if it is
    missing). Empty: every dynamic listener (the ones pushed by the control
    plane, e.g. an Istio gateway's 0.0.0.0_8443) that has an HTTP connection
    manager, or every such static listener when there is no dynamic one.
    """
    if name:
        chosen = tuple(item for item in config.listeners if item.name == name)
        if not chosen:
            known = ", ".join(sorted({item.name for item in config.listeners})) or "none"
            raise EnvoyError(
                f"{origin}: no active listener named {name!r}; listeners in the dump: {known}"
            )
        return chosen
    http = [item for item in config.listeners if item.hcms]
    dynamic = tuple(item for item in http if item.dynamic)
    chosen = dynamic or tuple(http)
    if not chosen:
        raise EnvoyError(
            f"{origin}: no listener with an HTTP connection manager in the dump; "
            "is this an HTTP edge proxy?"
        )
    return chosen
