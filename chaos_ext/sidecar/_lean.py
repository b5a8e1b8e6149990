"""Decode a page of pods or ReplicaSets keeping only what the drift check reads. Pure.

An Istio-injected pod is ~7 KB of JSON, mostly fields drift never looks at
(volumes, probes, security contexts, managed fields, conditions, the env's
``valueFrom``...). msgspec decodes a page in C straight into the slim shapes
below and skips every other field without building it. The shapes are
structs the garbage collector does not track and dicts of strings that it
untracks, so decoding a page of 500 pods sets off few of its passes. Each item
is then handed on, one at a time, as the plain dict the pure functions of
:mod:`chaos_ext.sidecar._drift` take (fields absent from the answer stay
absent: ``omit_defaults``). At 50,000 pods this is what keeps the check within
its goal and its memory at one page of slim items.

Anything msgspec does not accept (malformed JSON, a field of an unexpected
type) returns None: the caller then decodes that page with the standard
library (:func:`chaos_ext._core.jsonlist.stream_items`), whose errors are its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

__all__ = ["lean_pods", "lean_replicasets"]


class _Slim(msgspec.Struct, omit_defaults=True, gc=False):
    """Fields absent from the answer stay absent when turned back into a dict."""


class _Owner(_Slim):
    kind: str | None = None
    name: str | None = None
    controller: bool | None = None


class _Meta(_Slim):
    name: str | None = None
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    ownerReferences: list[_Owner] | None = None
    creationTimestamp: str | None = None


class _EnvVar(_Slim):
    name: str | None = None
    value: str | None = None  # drift compares values; ``valueFrom`` is skipped, not decoded


_Quantities = dict[str, str | int | float]


class _Resources(_Slim):
    requests: _Quantities | None = None
    limits: _Quantities | None = None


class _Container(_Slim):
    name: str | None = None
    image: str | None = None
    args: list[str] | None = None
    env: list[_EnvVar] | None = None
    resources: _Resources | None = None


class _Spec(_Slim):
    containers: list[_Container] | None = None
    initContainers: list[_Container] | None = None


class _Status(_Slim):
    startTime: str | None = None


class _Pod(_Slim):
    metadata: _Meta | None = None
    spec: _Spec | None = None
    status: _Status | None = None


class _ReplicaSet(_Slim):
    metadata: _Meta | None = None


class _ListMeta(_Slim):
    continue_: str | None = msgspec.field(default=None, name="continue")


class _PodList(_Slim):
    items: list[_Pod] | None = None
    metadata: _ListMeta | None = None


class _ReplicaSetList(_Slim):
    items: list[_ReplicaSet] | None = None
    metadata: _ListMeta | None = None


_PODS = msgspec.json.Decoder(_PodList)
_REPLICASETS = msgspec.json.Decoder(_ReplicaSetList)


def _page(decoder: msgspec.json.Decoder[Any], data: bytes) -> tuple[Iterator[Any], str] | None:
    try:
        page = decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    token = (page.metadata.continue_ if page.metadata else None) or ""
    # one item's dicts at a time: each dies young, once the caller has kept what it needs
    return (msgspec.to_builtins(item) for item in page.items or ()), token


def lean_pods(data: bytes) -> tuple[Iterator[dict[str, Any]], str] | None:
    """A page of a pod list as slim dicts, and its ``continue`` token; None: not decodable."""
    return _page(_PODS, data)


def lean_replicasets(data: bytes) -> tuple[Iterator[dict[str, Any]], str] | None:
    """A page of a ReplicaSet list (metadata only) and its ``continue`` token."""
    return _page(_REPLICASETS, data)
