"""How configuration fragments combine: Envoy's and Istio's merge semantics on JSON. Pure.

* :func:`proto_merge` is protobuf ``MergeFrom``, what Envoy does with
  ``--config-yaml`` and so with Istio's custom bootstrap
  (``ISTIO_BOOTSTRAP_OVERRIDE``; istio/istio samples/custom-bootstrap/README.md:
  "Singular values will replace the default values, while repeated values will
  be appended"): messages merge field by field, scalars are replaced, repeated
  fields are *appended*, map and ``google.protobuf.Struct`` entries are replaced
  per key, and an ``Any`` (a mapping with ``@type``) is replaced whole, because
  its packed bytes are. With ``deep_any`` an ``Any`` of the same type merges
  field by field instead: Istio's EnvoyFilter ``MERGE`` unpacks both sides
  (``MergeAnyWithAny``) before merging.
* :func:`upsert` is an edit in place, for a bootstrap the user owns:
  named list elements (``name``) are matched and merged, other lists replaced.

Caveat (protobuf, not us): a proto3 scalar set to its default (``0``,
``false``, ``""``) in an overlay does not override; no generated fix sets one.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MAP_FIELDS",
    "get_path",
    "path_tokens",
    "proto_merge",
    "set_path",
    "split_duplicates",
    "upsert",
]

MAP_FIELDS = frozenset(
    {
        "static_layer",
        "filter_metadata",
        "typed_filter_metadata",
        "typed_extension_protocol_options",
        "typed_per_filter_config",
        "per_filter_config",
        "config",
    }
)
"""Fields whose value is a map or a Struct: merged per key, each entry replaced."""


def proto_merge(base: Any, overlay: Any, *, deep_any: bool = False) -> Any:
    """``base`` merged with ``overlay`` as protobuf ``MergeFrom`` does (new objects)."""
    if not (isinstance(base, dict) and isinstance(overlay, dict)):
        if isinstance(base, list) and isinstance(overlay, list):
            return copy.deepcopy(base) + copy.deepcopy(overlay)
        return copy.deepcopy(overlay)
    if "@type" in overlay and not (deep_any and base.get("@type") == overlay["@type"]):
        return copy.deepcopy(overlay)
    merged = copy.deepcopy(base)
    for key, value in overlay.items():
        if key in MAP_FIELDS and isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key].update(copy.deepcopy(value))  # map entries are replaced, not merged
        elif key in merged:
            merged[key] = proto_merge(merged[key], value, deep_any=deep_any)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _named(items: list[Any]) -> bool:
    return bool(items) and all(isinstance(item, dict) and "name" in item for item in items)


def upsert(base: Any, patch: Any) -> Any:
    """``base`` with ``patch`` written into it: named elements matched by name (new objects)."""
    if isinstance(base, dict) and isinstance(patch, dict):
        merged = copy.deepcopy(base)
        for key, value in patch.items():
            merged[key] = upsert(merged[key], value) if key in merged else copy.deepcopy(value)
        return merged
    if isinstance(base, list) and isinstance(patch, list) and _named(patch):
        merged_list = copy.deepcopy(base)
        for item in patch:
            same = [
                i
                for i, old in enumerate(merged_list)
                if isinstance(old, dict) and old.get("name") == item["name"]
            ]
            index = same[0] if same else None
            if index is None:
                merged_list.append(copy.deepcopy(item))
            else:
                merged_list[index] = upsert(merged_list[index], item)
        return merged_list
    return copy.deepcopy(patch)


def split_duplicates(
    base: Mapping[str, Any], overlay: Mapping[str, Any], path: str = ""
) -> tuple[dict[str, Any], list[str]]:
    """``overlay`` without the named elements that appending it to ``base`` would duplicate,
    and the paths of those elements.

    Envoy refuses a bootstrap with two resource monitors, overload actions or
    listeners of one name, so such an element cannot be fixed by an overlay:
    the existing one has to be edited in place.
    """
    clean: dict[str, Any] = {}
    dropped: list[str] = []
    for key, value in overlay.items():
        here = f"{path}.{key}" if path else key
        old = base.get(key)
        if isinstance(value, dict) and isinstance(old, dict) and key not in MAP_FIELDS:
            clean[key], more = split_duplicates(old, value, here)
            dropped += more
        elif isinstance(value, list) and isinstance(old, list):
            names = {item.get("name") for item in old if isinstance(item, dict)}
            keep = [
                item for item in value if not (isinstance(item, dict) and item.get("name") in names)
            ]
            dropped += [f"{here}[?name = {item['name']!r}]" for item in value if item not in keep]
            if keep:
                clean[key] = copy.deepcopy(keep)
        else:
            clean[key] = copy.deepcopy(value)
    return {k: v for k, v in clean.items() if v != {}}, dropped


_TOKEN = re.compile(r'\.?([A-Za-z_]\w*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def path_tokens(path: str) -> list[str | int]:
    """``a.b[2]["x.y"]`` as ``["a", "b", 2, "x.y"]`` (the paths the audit reports)."""
    tokens: list[str | int] = []
    pos = 0
    while pos < len(path):
        found = _TOKEN.match(path, pos)
        if found is None:
            raise ValueError(f"not a report path: {path!r} (at {pos})")
        name, index, quoted = found.groups()
        tokens.append(name if name else int(index) if index else json.loads(quoted))
        pos = found.end()
    return tokens


def set_path(root: Any, tokens: list[str | int], value: Any) -> None:
    """Write ``value`` at ``tokens`` inside ``root`` (containers on the way must exist)."""
    target = root
    for token in tokens[:-1]:
        target = target[token]
    target[tokens[-1]] = value


def get_path(root: Any, tokens: list[str | int]) -> Any:
    """The value at ``tokens`` inside ``root``."""
    for token in tokens:
        root = root[token]
    return root
