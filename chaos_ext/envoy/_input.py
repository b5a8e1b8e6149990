"""Decode an Envoy configuration and say what kind it is. Pure.

Accepted (detected from the content, not the file name):

* ``config_dump``: the admin ``/config_dump`` body, ``{"configs": [...]}`` with
  ``envoy.admin.v3.*`` or the older ``envoy.admin.v2alpha.*`` entries;
  lowerCamelCase keys (``dynamicListeners``, what Go's jsonpb printed for
  older ``istioctl`` output) are turned back into proto field names;
* ``bootstrap``: an Envoy bootstrap (``envoy.yaml``, Istio's generated
  ``envoy-rev.json``, a custom-bootstrap overlay), JSON or YAML: a mapping with
  bootstrap fields (``static_resources``, ``overload_manager``, ...).

Anything else raises EnvoyError saying what was found and what is expected.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from chaos_ext.envoy._camel import CAMEL, snake_keys
from chaos_ext.envoy._lean import lean_dump
from chaos_ext.envoy.errors import EnvoyError

__all__ = ["BOOTSTRAP_FIELDS", "Decoded", "decode", "snake_keys"]

BOOTSTRAP_FIELDS = frozenset(
    {
        "node",
        "static_resources",
        "dynamic_resources",
        "cluster_manager",
        "admin",
        "overload_manager",
        "layered_runtime",
        "stats_config",
        "stats_sinks",
        "tracing",
        "bootstrap_extensions",
        "watchdog",
        "watchdogs",
        "runtime",
        "hds_config",
        "node_context_params",
        "stats_flush_interval",
        "application_log_config",
        "default_socket_interface",
        "inline_headers",
        "deferred_stat_options",
        "flags_path",
        "header_prefix",
        "fatal_actions",
        "stats_server_version_override",
    }
)
_CAMEL_HINTS = (
    "dynamicListeners",
    "staticListeners",
    "dynamicActiveClusters",
    "staticClusters",
    "staticResources",
    "dynamicResources",
)


@dataclass(frozen=True)
class Decoded:
    """A decoded document: its kind, its data, the syntax and what was done to it."""

    kind: str  # "config_dump" | "bootstrap"
    data: dict[str, Any]
    syntax: str  # "JSON" | "YAML"
    notes: tuple[str, ...] = ()


def _parse(raw: bytes | str, origin: str) -> tuple[Any, str]:
    text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return json.loads(text), "JSON"
        except json.JSONDecodeError as exc:
            json_error = exc
    else:
        json_error = None
    if not stripped:
        raise EnvoyError(
            f"{origin}: the input is empty; expected Envoy's /config_dump or a "
            "bootstrap (JSON or YAML)"
        )
    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        docs = [doc for doc in yaml.load_all(text, Loader=loader) if doc is not None]
    except yaml.YAMLError as exc:
        if json_error is not None:  # it looked like JSON: report the JSON error
            raise EnvoyError(
                f"{origin}: not valid JSON (line {json_error.lineno}, column "
                f"{json_error.colno}: {json_error.msg}); expected Envoy's /config_dump "
                "or a bootstrap (JSON or YAML)"
            ) from None
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise EnvoyError(
            f"{origin}: neither JSON nor valid YAML{where}: "
            f"{getattr(exc, 'problem', None) or exc}; expected Envoy's /config_dump "
            "or a bootstrap (JSON or YAML)"
        ) from None
    if len(docs) > 1:  # a trailing or leading '---' alone is fine; two documents are not
        raise EnvoyError(f"{origin}: {len(docs)} YAML documents; give the bootstrap alone")
    return (docs[0] if docs else None), "YAML"


def _looks_camel(data: Mapping[str, Any]) -> bool:
    text_keys = set(data)
    for entry in data.get("configs") or []:
        if isinstance(entry, dict):
            text_keys |= set(entry)
    return any(hint in text_keys for hint in _CAMEL_HINTS)


def _kind(data: Any, origin: str) -> str:
    if isinstance(data, dict) and isinstance(data.get("configs"), list):
        return "config_dump"
    if isinstance(data, dict) and "configs" in data:
        raise EnvoyError(f"{origin}: 'configs' is not a list: not an Envoy /config_dump")
    if isinstance(data, dict) and set(data) & BOOTSTRAP_FIELDS:
        return "bootstrap"
    if isinstance(data, dict) and isinstance(data.get("bootstrap"), dict):
        return "bootstrap_dump"  # one BootstrapConfigDump entry (?resource=bootstrap)
    names = {type(None): "nothing (only comments or '---')"}
    found = (
        names.get(type(data), type(data).__name__)
        if not isinstance(data, dict)
        else ("keys " + ", ".join(sorted(map(str, data))[:8]) if data else "an empty mapping")
    )
    raise EnvoyError(
        f"{origin}: neither an Envoy /config_dump ('configs' list) nor a bootstrap "
        f"(static_resources, overload_manager, layered_runtime, ...): found {found}. "
        "Fetch the whole /config_dump (no ?resource= or ?mask=) or give the bootstrap file"
    )


def _lean(
    raw: bytes | str, cluster_keys: frozenset[str] | None
) -> tuple[dict[str, Any], tuple[str, ...]] | None:
    body = raw.encode() if isinstance(raw, str) else raw
    if body.lstrip()[:1] != b"{" or b'"configs"' not in body:
        return None
    return lean_dump(body, cluster_keys=cluster_keys)


def decode(
    raw: bytes | str, *, origin: str, lean: bool = True, cluster_keys: frozenset[str] | None = None
) -> Decoded:
    """Parse ``raw`` (JSON or YAML) and classify it; EnvoyError quoting ``origin``.

    ``lean``: a JSON ``/config_dump`` is read without building what no rule
    reads (:mod:`._lean`): other entries keep only their ``@type``, clusters
    only ``cluster_keys`` (None: every field).
    """
    found = _lean(raw, cluster_keys) if lean else None
    notes: list[str] = []
    if found is not None:
        data, syntax = found[0], "JSON"
        notes += found[1]
    else:
        try:
            data, syntax = _parse(raw, origin)
        except UnicodeDecodeError as exc:
            raise EnvoyError(f"{origin}: not UTF-8 ({exc.reason}); expected JSON or YAML") from None
    kind = _kind(data, origin)
    if kind == "bootstrap_dump":
        data, kind = data["bootstrap"], "bootstrap"
        notes.append("a single BootstrapConfigDump entry: its bootstrap is read")
    if kind == "config_dump" and _looks_camel(data):
        data = snake_keys(data)
        notes.append("lowerCamelCase field names (jsonpb output) read as proto field names")
    elif kind == "bootstrap" and any(CAMEL.search(key) for key in data if not key.startswith("@")):
        data = snake_keys(data)
        notes.append("lowerCamelCase field names read as proto field names")
    return Decoded(kind, data, syntax, tuple(notes))
