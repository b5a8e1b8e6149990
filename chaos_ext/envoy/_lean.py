"""Read a ``/config_dump`` without building what no rule reads. Pure.

A gateway's dump is mostly routes and clusters (a 100 MB dump: ~50 MB of
RoutesConfigDump, ~40 MB of ClustersConfigDump). ``json.loads`` builds Python
objects for all of it (~5x the text). msgspec scans the document in C and
hands back the raw bytes of each value (``msgspec.Raw``, a view, no copy), so
only the entries the audit reads are decoded: the bootstrap and listeners
whole, each cluster one at a time and kept with just the fields cluster rules
look at (plus its name). Entries of other types keep only their ``@type``.

Anything msgspec does not accept (malformed JSON, a number beyond a float's
range, ``configs`` that is not a list of objects) returns None: the caller then
parses with the standard library, whose errors name line and column.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from chaos_ext.envoy._camel import snake_keys

__all__ = ["READ_TYPES", "lean_dump"]

READ_TYPES = (".BootstrapConfigDump", ".ListenersConfigDump")
_CLUSTERS = ".ClustersConfigDump"
_Entries = list[dict[str, msgspec.Raw]]


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


def _entries(
    entries: _Entries, keys: frozenset[str] | None, skipped: list[str]
) -> Iterable[dict[str, Any]]:
    for entry in entries:
        type_url = _decode(entry["@type"]) if "@type" in entry else None
        if not isinstance(type_url, str) or type_url.endswith(READ_TYPES):
            yield {key: _decode(raw) for key, raw in entry.items()}
        elif type_url.endswith(_CLUSTERS):
            yield _clusters(entry, keys)
        else:
            skipped.append(type_url.rsplit(".", 1)[-1])
            yield {"@type": type_url}


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
        configs = list(_entries(entries, cluster_keys, skipped))
        data = {key: _decode(value) for key, value in top.items() if key != "configs"}
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    data["configs"] = configs
    notes = []
    if skipped:
        notes.append(f"not parsed, no rule reads them: {', '.join(sorted(set(skipped)))}")
    return data, tuple(notes)
