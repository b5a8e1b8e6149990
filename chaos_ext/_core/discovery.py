"""Real argument types for ``chaos discover``.

chaoslib's discovery reads ``inspect.signature(func)`` annotations as they are.
Our modules use ``from __future__ import annotations``, so every annotation is
a *string* (``"str"``, ``"dict[str, Any] | None"``) and chaoslib's
``portable_type_name`` answers ``object`` for all of them; even resolved, it
knows neither ``X | None`` nor ``dict[str, Any]`` (only ``typing.Dict``).

Here the annotations are resolved with :func:`typing.get_type_hints` and mapped
to chaoslib's portable names (the ones ``chaos init`` turns back into Python
types): ``X | None`` is ``X``; ``dict``/``Mapping`` are ``mapping``;
``list``/``Sequence`` are ``list``. A union of two JSON kinds that includes
``str`` (``int | str`` for ``"max"`` or a number, ``list[str] | str`` for one
URL or several) is ``string``: the form ``chaos init`` can fill in and the
activity accepts. ``object`` remains only for ``Any`` (really unknown).
"""

from __future__ import annotations

import collections.abc
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

__all__ = ["activity_types", "portable_type"]

_SCALARS: dict[Any, str] = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    bytes: "byte",
    type(None): "null",
}
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)
_SEQUENCES = (list, collections.abc.Sequence, collections.abc.MutableSequence)
_SETS = (set, frozenset, collections.abc.Set, collections.abc.MutableSet)
_CONTAINERS = ((_MAPPINGS, "mapping"), (_SEQUENCES, "list"), ((tuple,), "tuple"), (_SETS, "set"))


def _union_members(hint: Any) -> tuple[Any, ...] | None:
    origin = typing.get_origin(hint)
    if origin is typing.Union or isinstance(hint, types.UnionType):
        return typing.get_args(hint)
    return None


def _union_type(members: tuple[Any, ...]) -> str:
    names = {portable_type(m) for m in members if m is not type(None)}
    if len(names) == 1:
        return names.pop()
    if "string" in names:
        return "string"
    return "number" if names == {"integer", "number"} else "object"


def portable_type(hint: Any) -> str:
    """chaoslib's portable type name for a resolved annotation."""
    members = _union_members(hint)
    if members is not None:
        return _union_type(members)
    if hint in _SCALARS:
        return _SCALARS[hint]
    origin = typing.get_origin(hint) or hint
    for kinds, name in _CONTAINERS:
        if origin in kinds:
            return name
    return "object"


def activity_types(func: Callable[..., Any]) -> tuple[dict[str, str], str | None]:
    """``({argument: portable type}, return type)`` of an activity, as chaoslib lists them."""
    hints = typing.get_type_hints(func)
    arguments = {
        name: portable_type(hints[name])
        for name, param in inspect.signature(func).parameters.items()
        if name in hints and param.kind not in (param.KEYWORD_ONLY, param.VAR_KEYWORD)
    }
    returned = portable_type(hints["return"]) if "return" in hints else None
    return arguments, returned
