"""lowerCamelCase proto JSON (Go jsonpb output) back to proto field names. Pure."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["CAMEL", "MAP_KEY_FIELDS", "snake_keys"]

CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")
# Values of these fields are maps or google.protobuf.Struct: their keys are data
# (runtime keys, metadata, v2 "config" structs) and keep their spelling.
MAP_KEY_FIELDS = frozenset(
    {
        "static_layer",
        "metadata",
        "filter_metadata",
        "typed_filter_metadata",
        "config",
        "typed_extension_protocol_options",
        "typed_per_filter_config",
        "per_filter_config",
        "value",
        "labels",
        "annotations",
    }
)


def snake_keys(value: Any, *, keep: bool = False) -> Any:
    """``value`` with lowerCamelCase proto field names in snake_case (map keys kept)."""
    if isinstance(value, list):
        return [snake_keys(item, keep=keep) for item in value]
    if not isinstance(value, dict):
        return value
    if keep:  # a map or Struct: its keys are data, its values may hold messages again
        return {
            key: snake_keys(item, keep=False)
            if isinstance(item, dict) and "@type" in item
            else item
            for key, item in value.items()
        }
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = key if key.startswith("@") else CAMEL.sub(r"_\1", key).lower()
        out[name] = snake_keys(item, keep=name in MAP_KEY_FIELDS)
    return out
