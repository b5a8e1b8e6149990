"""A hypothesis probe's own figure: the value its tolerance judges (pure).

Chaos Toolkit judges what the tolerance picks from the probe's output: a range
tolerance with ``target`` judges ``output[target]`` (gameday's load probes:
``{"type": "range", "target": "error_ratio", ...}``), a ``jsonpath`` tolerance
the values at its ``path`` (``$.passed``), a number or a list with an output
that has a ``status`` that status (chaoslib's HTTP probes), anything else the
output itself. The figure is that value as a number: a number is itself, a bool
1/0, anything else has none (None, never a JSON dump). :func:`figure_text` is
how outputs show it (``error_ratio 0.973``, ``true``, ``12.5``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from jsonpath_ng.exceptions import JSONPathError
from jsonpath_ng.ext.parser import parse as parse_jsonpath

from chaos_ext._core.timeline.texts import substitute

__all__ = ["figure_of", "figure_text", "judged_value"]

_MISSING = object()


@lru_cache(maxsize=64)
def _parsed(path: str) -> Any:
    return parse_jsonpath(path)  # parsing costs far more than matching: once per path


def _jsonpath(value: Any, path: str) -> Any:
    try:
        found = [m.value for m in _parsed(path).find(value)]
    except (JSONPathError, AttributeError, TypeError, ValueError, IndexError):
        return _MISSING
    return found[0] if len(found) == 1 else _MISSING


def judged_value(output: Any, tolerance: Any, values: Mapping[str, Any] | None = None) -> Any:
    """What ``tolerance`` judges of ``output`` (``${var}`` in its target or path
    substituted from ``values``); None when its JSON path picks nothing, or more than one."""
    values = values or {}
    if isinstance(tolerance, Mapping):
        target = tolerance.get("target")
        if target and isinstance(output, Mapping):
            output = output.get(substitute(str(target), values), output)
        if tolerance.get("type") == "jsonpath" and tolerance.get("path"):
            picked = _jsonpath(output, substitute(str(tolerance["path"]), values))
            return None if picked is _MISSING else picked
        return output
    status_judged = isinstance(tolerance, int | list) and not isinstance(tolerance, bool)
    if status_judged and isinstance(output, Mapping) and "status" in output:
        return output["status"]
    return output


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def figure_of(output: Any, tolerance: Any, values: Mapping[str, Any] | None = None) -> float | None:
    """The number the tolerance compares (module docstring); None when it is no number."""
    return _number(judged_value(output, tolerance, values))


def _label(tolerance: Any, values: Mapping[str, Any]) -> str:
    if not isinstance(tolerance, Mapping):
        return ""
    if tolerance.get("target"):
        return substitute(str(tolerance["target"]), values)
    if tolerance.get("type") == "jsonpath" and tolerance.get("path"):
        return substitute(str(tolerance["path"]), values)
    return ""


def figure_text(output: Any, tolerance: Any, values: Mapping[str, Any] | None = None) -> str:
    """The figure as a report cell shows it: ``error_ratio 0.973``, ``true``, ``12.5``;
    a string figure quoted when short; ``""`` when there is no figure to show."""
    values = values or {}
    judged = judged_value(output, tolerance, values)
    label = _label(tolerance, values)
    if isinstance(judged, bool):
        text = str(judged).lower()
    elif (number := _number(judged)) is not None:
        text = f"{number:.4g}"
    elif isinstance(judged, str) and len(judged) <= 40 and "\n" not in judged:
        text = judged
    elif judged is None and output is None:
        text = "no output"
    else:
        return f"{label}: not a number" if label else ""
    return f"{label} {text}" if label else text
