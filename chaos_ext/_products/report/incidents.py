"""An incident replay's figures from its journal: errors by cause with onset, breaking point,
latency amplification.

The classes, onsets and breaking point are what the ``error_onset`` probe
(``chaos_ext.load.probes``) returned in the method. The amplification comes
from four probes the experiment names in its ``incident`` extension::

    {"name": "incident", "amplification": {
        "response_before": "<load_window_stats before the fault>",
        "response_during": "<load_window_stats during it>",
        "rtt_before": "<measure_rtt before>", "rtt_during": "<measure_rtt during>"}}

``(p50 during - p50 before) / (RTT median during - RTT median before)``
(``chaos_ext.load.onset.amplification``): about how many sequential round
trips to the database a request makes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chaos_ext.errors import InvalidArgument
from chaos_ext.load.onset import amplification

__all__ = ["IncidentView", "incident_part"]

_ONSET = ("chaos_ext.load.probes", "error_onset")
_AMPLIFICATION_KEYS = ("response_before", "response_during", "rtt_before", "rtt_during")


@dataclass(frozen=True)
class IncidentView:
    """What an incident replay measured, for the report."""

    classes: tuple[Mapping[str, Any], ...]
    errors: int
    scheduled: int
    peak_rate: float | None
    breaking_point: Mapping[str, Any] | None
    held_to_rate: float | None
    amplification: Mapping[str, Any] | None

    @property
    def rows(self) -> list[dict[str, str]]:
        """One row per class: errors, share, onset load and time (text for the templates)."""
        return [
            {
                "error_class": str(c.get("error_class")),
                "count": str(c.get("count")),
                "share": f"{100 * float(c.get('share') or 0):.1f} %",
                "onset_rate": "-" if c.get("onset_rate") is None else f"{c['onset_rate']:g} req/s",
                "onset_at": "-"
                if c.get("onset_offset_seconds") is None
                else f"+{c['onset_offset_seconds']:g} s",
            }
            for c in self.classes
        ]

    @property
    def amplification_text(self) -> str:
        a = self.amplification
        if not a:
            return ""
        if a.get("value") is None:
            return f"amplification {a.get('why')}"
        return (
            f"amplification {a['value']:g}: the median response went from"
            f" {a['response_before_ms']:.1f} ms to {a['response_during_ms']:.1f} ms while the"
            f" database round trip went from {a['rtt_before_ms']:.2f} ms to"
            f" {a['rtt_during_ms']:.2f} ms"
        )

    @property
    def breaking_text(self) -> str:
        if self.breaking_point:
            bp = self.breaking_point
            crossed = " and ".join(str(c).replace("_", " ") for c in bp.get("crossed") or [])
            return f"breaks at {bp.get('rate'):g} req/s ({crossed} over the SLO)"
        if self.held_to_rate is not None:
            return f"holds to {self.held_to_rate:g} req/s (the ramp's peak)"
        return ""


def _runs(journal: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r for r in journal.get("run") or [] if isinstance(r, Mapping)]


def _provider(run: Mapping[str, Any]) -> tuple[str, str]:
    provider = (run.get("activity") or {}).get("provider") or {}
    return str(provider.get("module", "")), str(provider.get("func", ""))


def _outputs_by_name(journal: Mapping[str, Any]) -> dict[str, Any]:
    return {
        str((r.get("activity") or {}).get("name")): r.get("output")
        for r in _runs(journal)
        if r.get("status") == "succeeded"
    }


def _extension(journal: Mapping[str, Any]) -> Mapping[str, Any]:
    for ext in (journal.get("experiment") or {}).get("extensions") or []:
        if isinstance(ext, Mapping) and ext.get("name") == "incident":
            return ext
    return {}


def _number(output: Any, key: str) -> float | None:
    value = output.get(key) if isinstance(output, Mapping) else None
    return float(value) if isinstance(value, int | float) else None


def amplification_of(journal: Mapping[str, Any]) -> dict[str, Any] | None:
    """The amplification the ``incident`` extension asks for, or None (with why, if it can't)."""
    names = _extension(journal).get("amplification")
    if not isinstance(names, Mapping):
        return None
    outputs = _outputs_by_name(journal)
    values = {
        "response_before_ms": _number(outputs.get(str(names.get("response_before"))), "p50_ms"),
        "response_during_ms": _number(outputs.get(str(names.get("response_during"))), "p50_ms"),
        "rtt_before_ms": _number(outputs.get(str(names.get("rtt_before"))), "median_ms"),
        "rtt_during_ms": _number(outputs.get(str(names.get("rtt_during"))), "median_ms"),
    }
    missing = [k for k, v in values.items() if v is None]
    if missing:
        return {**values, "value": None, "why": f"not measured: {', '.join(missing)}"}
    try:
        value = amplification(
            values["response_before_ms"] or 0.0,
            values["response_during_ms"] or 0.0,
            values["rtt_before_ms"] or 0.0,
            values["rtt_during_ms"] or 0.0,
        )
    except InvalidArgument as exc:
        return {**values, "value": None, "why": str(exc)}
    return {**values, "value": round(value, 2), "why": ""}


def incident_part(journal: Mapping[str, Any]) -> dict[str, Any]:
    """``{"incident": IncidentView | None}`` for ``model.view_of``."""
    onset = next(
        (
            r.get("output")
            for r in _runs(journal)
            if _provider(r) == _ONSET and isinstance(r.get("output"), Mapping)
        ),
        None,
    )
    amplified = amplification_of(journal)
    if onset is None and amplified is None:
        return {"incident": None}
    found: Mapping[str, Any] = onset or {}
    return {
        "incident": IncidentView(
            classes=tuple(c for c in found.get("classes") or [] if isinstance(c, Mapping)),
            errors=int(found.get("errors") or 0),
            scheduled=int(found.get("scheduled") or 0),
            peak_rate=_number(found, "peak_rate"),
            breaking_point=found.get("breaking_point") or None,
            held_to_rate=_number(found, "held_to_rate"),
            amplification=amplified,
        )
    }
