"""Read a ``/config_dump`` without building what no rule reads. Pure.

A gateway's dump is mostly routes and clusters (a 100 MB dump: ~50 MB of
RoutesConfigDump, ~40 MB of ClustersConfigDump). ``json.loads`` builds Python
objects for all of it (~5x the text). msgspec scans the document in C and
hands back the raw bytes of each value (``msgspec.Raw``, a view, no copy), so
only the entries the audit reads are decoded: the bootstrap and listeners
whole, each cluster one at a time and kept with just the fields cluster rules
look at (plus its name), the route configurations the listeners name
(``rds.route_config_name``) with just what route rules and route labels read
(names, matches, each ``RouteAction``'s timeouts: msgspec skips the rest, the
domains, headers to add, retry policies...), the other route configurations
left out.
Entries of other types keep only their ``@type``.

Anything msgspec does not accept (malformed JSON, a number beyond a float's
range, ``configs`` that is not a list of objects) returns None: the caller then
parses with the standard library, whose errors name line and column.
"""

from __future__ import annotations

from typing import Any, TypedDict

import msgspec

from chaos_ext.envoy._camel import snake_keys

__all__ = ["READ_TYPES", "lean_dump"]

READ_TYPES = (".BootstrapConfigDump", ".ListenersConfigDump")
_CLUSTERS = ".ClustersConfigDump"
_ROUTES = ".RoutesConfigDump"
_LISTENERS = ".ListenersConfigDump"
_Entries = list[dict[str, msgspec.Raw]]


class _Action(TypedDict, total=False):
    timeout: Any
    idle_timeout: Any
    max_stream_duration: Any
    max_grpc_timeout: Any
    grpc_timeout_offset: Any


class _Route(TypedDict, total=False):
    name: Any
    match: Any
    route: _Action


class _Host(TypedDict, total=False):
    name: Any
    routes: list[_Route]


class _RouteConfig(TypedDict, total=False):
    name: Any
    virtual_hosts: list[_Host]


class _RouteItem(TypedDict, total=False):
    name: Any
    route_config: _RouteConfig


_ROUTE_LISTS = ("static_route_configs", "dynamic_route_configs")


def _decode(raw: msgspec.Raw | bytes) -> Any:
    return msgspec.json.decode(raw)


def _pick(raw: msgspec.Raw, keys: frozenset[str]) -> Any:
    """Decode only ``keys`` of a JSON object (the rest stays unparsed bytes, then dropped)."""
    fields = msgspec.json.decode(raw, type=dict[str, msgspec.Raw])
    return {key: _decode(value) for key, value in fields.items() if key in keys}


def _cluster_item(raw: msgspec.Raw, keys: frozenset[str] | None, camel: bool) -> Any:
    if keys is None or camel:  # every field wanted, or names to convert first
        item = _decode(raw)
        if camel:
            item = snake_keys(item)
        if keys is None or not isinstance(item, dict):
            return item
        if isinstance(item.get("cluster"), dict):
            return {**item, "cluster": {k: v for k, v in item["cluster"].items() if k in keys}}
        return {k: v for k, v in item.items() if k in keys}
    if bytes(memoryview(raw)[:1]) != b"{":
        return _decode(raw)
    fields = msgspec.json.decode(raw, type=dict[str, msgspec.Raw])
    if "cluster" in fields:  # a dump entry: {"cluster": {...}, "last_updated": ...}
        return {
            key: _pick(value, keys) if key == "cluster" else _decode(value)
            for key, value in fields.items()
        }
    return {key: _decode(value) for key, value in fields.items() if key in keys}


def _clusters(entry: dict[str, msgspec.Raw], keys: frozenset[str] | None) -> dict[str, Any]:
    camel = any(key != key.lower() for key in entry)
    out: dict[str, Any] = {}
    for key, raw in entry.items():
        if bytes(memoryview(raw)[:1]) != b"[":
            out[key] = _decode(raw)
            continue
        items = msgspec.json.decode(raw, type=list[msgspec.Raw])
        out[key] = [_cluster_item(item, keys, camel) for item in items]
    return out


def _rds_names(value: Any) -> set[str]:
    """Every ``rds.route_config_name`` in ``value`` (listeners: what their HCMs route by)."""
    names: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            rds = item.get("rds")
            if isinstance(rds, dict):
                name = rds.get("route_config_name", rds.get("routeConfigName"))
                if isinstance(name, str):
                    names.add(name)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return names


class _Name(TypedDict, total=False):
    name: Any


class _Named(TypedDict, total=False):
    route_config: _Name


def _route_items(raw: msgspec.Raw, wanted: set[str]) -> list[Any]:
    """The route configs a listener names, with what route rules read; the others left out."""
    out = []
    for item in msgspec.json.decode(raw, type=list[msgspec.Raw]):
        named = msgspec.json.decode(item, type=_Named)
        if (named.get("route_config") or {}).get("name") in wanted:
            out.append(msgspec.json.decode(item, type=_RouteItem))
    return out


def _routes(entry: dict[str, msgspec.Raw], wanted: set[str]) -> dict[str, Any]:
    """A RoutesConfigDump with only what route rules read (all of it if camelCase)."""
    if any(key != key.lower() for key in entry):  # names to convert first: decode whole
        return {key: _decode(raw) for key, raw in entry.items()}
    return {
        key: _route_items(raw, wanted) if key in _ROUTE_LISTS else _decode(raw)
        for key, raw in entry.items()
    }


def _entries(
    entries: _Entries, keys: frozenset[str] | None, skipped: list[str]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    later: list[tuple[int, dict[str, msgspec.Raw]]] = []
    for entry in entries:
        type_url = _decode(entry["@type"]) if "@type" in entry else None
        if not isinstance(type_url, str) or type_url.endswith(READ_TYPES):
            out.append({key: _decode(raw) for key, raw in entry.items()})
        elif type_url.endswith(_CLUSTERS):
            out.append(_clusters(entry, keys))
        elif type_url.endswith(_ROUTES):  # not ScopedRoutesConfigDump: no "." before Routes
            later.append((len(out), entry))  # once the listeners say which routes they use
            out.append({})
        else:
            skipped.append(type_url.rsplit(".", 1)[-1])
            out.append({"@type": type_url})
    wanted = _rds_names([item for item in out if str(item.get("@type", "")).endswith(_LISTENERS)])
    for index, entry in later:
        out[index] = _routes(entry, wanted)
    return out


def lean_dump(
    raw: bytes, *, cluster_keys: frozenset[str] | None
) -> tuple[dict[str, Any], tuple[str, ...]] | None:
    """The dump with only what the audit reads, and notes on what was left out; or None."""
    try:
        top = msgspec.json.decode(raw, type=dict[str, msgspec.Raw])
        if "configs" not in top:
            return None
        entries = msgspec.json.decode(top["configs"], type=_Entries)
        skipped: list[str] = []
        configs = _entries(entries, cluster_keys, skipped)
        data = {key: _decode(value) for key, value in top.items() if key != "configs"}
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    data["configs"] = configs
    notes = []
    if skipped:
        notes.append(f"not parsed, no rule reads them: {', '.join(sorted(set(skipped)))}")
    return data, tuple(notes)
