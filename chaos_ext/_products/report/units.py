"""The unit of a charted series, for its y axis: from the probe catalog first.

In order, the first that knows wins:

1. the probe catalog (``probes/*.yaml``, every entry has a ``unit``): a probe
   that calls a catalog entry (``catalog_probe``/``catalog_check`` with its
   ``name``), or is named like one;
2. what the hypothesis' tolerance judges: its ``target`` key (``p99_ms``:
   milliseconds, ``error_ratio``: ratio, ...);
3. the PromQL the probe runs: a ``histogram_quantile`` over a ``*_seconds``
   histogram is seconds; one rate divided by another a ratio; a rate per second;
4. the probe's name (``connect-ms``: milliseconds, ``...-ratio``, ``...-per-second``).

A figure that is a bool (``catalog_check``, ``slo_holds``, a readiness check)
is ``true/false`` whatever it checks. Nothing known: ``""`` (the axis says so).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from chaos_ext.prometheus.catalogs import default_catalog

__all__ = ["BOOLEAN", "promql_unit", "unit_of", "units_of"]

BOOLEAN = "true/false"
_CATALOG_FUNCS = ("catalog_probe", "catalog_check")
_SUFFIXES = (
    (("ms", "millis", "milliseconds"), "milliseconds"),
    (("s", "sec", "secs", "seconds"), "seconds"),
    (("ratio", "fraction", "share"), "ratio"),
    (("rate", "per-second", "per_second", "rps", "qps"), "per second"),
    (("percent", "pct"), "percent"),
)
_STAT = re.compile(r" (p50|p90|p95|p99|min|max|mean)$")


@lru_cache(maxsize=1)
def _catalog_units() -> dict[str, str]:
    return {name: probe.unit for name, probe in default_catalog().probes.items() if probe.unit}


def promql_unit(expr: str) -> str:
    """The unit of a PromQL expression's value, when its shape says (else ``""``)."""
    text = re.sub(r"\s+", "", expr)
    if "histogram_quantile(" in text:
        if re.search(r"_seconds_bucket", text):
            return "seconds"
        if re.search(r"_(ms|milliseconds)_bucket", text):
            return "milliseconds"
        return ""
    rates = len(re.findall(r"\b(?:i?rate|increase)\(", text))
    if rates >= 2 and re.search(r"\)\s*/\s*\(?(?:sum|avg|max|min|count)?", text):
        return "ratio"
    return "per second" if rates else ""


def _by_words(text: str) -> str:
    words = re.split(r"[^a-z0-9]+", text.lower())
    last = words[-1] if words else ""
    for endings, unit in _SUFFIXES:
        if last in endings:
            return unit
    joined = "-".join(words)
    if "per-second" in joined or joined.endswith("-per-s"):
        return "per second"
    return "ratio" if "ratio" in words else ""


def unit_of(name: str, activity: Mapping[str, Any] | None, boolean: bool = False) -> str:
    """The unit of the series ``name`` of ``activity`` (module docstring)."""
    if boolean:
        return BOOLEAN
    activity = activity or {}
    provider = activity.get("provider")
    provider = provider if isinstance(provider, Mapping) else {}
    arguments = provider.get("arguments")  # a process provider's may be a string or a list
    arguments = arguments if isinstance(arguments, Mapping) else {}
    catalog = _catalog_units()
    if provider.get("func") in _CATALOG_FUNCS and str(arguments.get("name")) in catalog:
        return catalog[str(arguments["name"])]
    if name in catalog:
        return catalog[name]
    tolerance = activity.get("tolerance")
    if isinstance(tolerance, Mapping) and tolerance.get("target"):
        found = _by_words(str(tolerance["target"]))
        if found:
            return found
    if isinstance(arguments.get("expr"), str) and (found := promql_unit(arguments["expr"])):
        return found
    return _by_words(_STAT.sub("", name))


def units_of(series: Iterable[tuple[str, bool]], experiment: Mapping[str, Any]) -> dict[str, str]:
    """``{series name: unit}`` for ``(name, boolean)`` series of ``experiment``'s probes
    (a series is named after its activity, plus a statistic or labels)."""
    hypothesis = experiment.get("steady-state-hypothesis") or {}
    activities = [*(hypothesis.get("probes") or []), *(experiment.get("method") or [])]
    by_name = {str(a.get("name")): a for a in activities if isinstance(a, Mapping)}

    def activity_of(name: str) -> Mapping[str, Any] | None:
        base = _STAT.sub("", name).split("{", 1)[0]
        return by_name.get(name) or by_name.get(base)

    return {name: unit_of(name, activity_of(name), boolean) for name, boolean in series}
