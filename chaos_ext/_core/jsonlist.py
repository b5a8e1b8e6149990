"""Decode a Kubernetes list answer one item at a time (pure; the json module's own decoder).

``json.loads`` of a page of 500 Istio-injected pods builds ~150,000
containers that stay alive together while the page is decoded, so CPython's
cyclic garbage collector promotes them all to its oldest generation and then
walks the whole heap again and again: on 10,000 pods its passes cost about
three times the decoding itself. Pausing the collector would change the
whole process (every thread, the code embedding us), so instead each item is
decoded on its own with ``JSONDecoder.raw_decode`` and handed over before the
next one is built: a pod's few hundred containers die young, in the cheap
generation, once the caller has kept what it needs.

The answer must be one JSON object; its ``items`` array is streamed, every
other member (``kind``, ``metadata`` with ``continue``...) is decoded whole
into ``envelope``. Invalid JSON raises ``ValueError`` like ``json.loads``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

__all__ = ["stream_items"]

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def _skip(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    return match.end() if match else at


def _expect(text: str, at: int, char: str) -> int:
    at = _skip(text, at)
    if text[at : at + 1] != char:
        raise ValueError(f"expected {char!r} at character {at}")
    return at + 1


def _array(text: str, at: int, end: list[int]) -> Iterator[Any]:
    """Values of the array starting at ``at`` (just after ``[``); ``end[0]``: after its ``]``."""
    at = _skip(text, at)
    if text[at : at + 1] != "]":
        while True:
            value, at = _DECODER.raw_decode(text, _skip(text, at))
            yield value
            at = _skip(text, at)
            if text[at : at + 1] == "]":
                break
            at = _expect(text, at, ",")
    end[0] = _expect(text, at, "]")


def stream_items(text: str, envelope: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Yield the objects of ``text``'s ``items`` array; fill ``envelope`` with the rest.

    ``envelope`` is complete once the generator is exhausted.
    """
    at = _expect(text, 0, "{")
    if text[_skip(text, at) : _skip(text, at) + 1] == "}":
        return
    while True:
        key, at = _DECODER.raw_decode(text, _skip(text, at))
        if not isinstance(key, str):
            raise ValueError(f"expected an object key at character {at}")
        at = _expect(text, at, ":")
        at = _skip(text, at)
        if key == "items" and text[at : at + 1] == "[":
            end = [at]
            for item in _array(text, at + 1, end):
                if not isinstance(item, dict):
                    raise ValueError("an item of the list is not a JSON object")
                yield item
            at = end[0]
        else:
            envelope[key], at = _DECODER.raw_decode(text, at)
        at = _skip(text, at)
        if text[at : at + 1] == "}":
            break
        at = _expect(text, at, ",")
    if _skip(text, at + 1) != len(text):
        raise ValueError(f"extra data after the list at character {at + 1}")
