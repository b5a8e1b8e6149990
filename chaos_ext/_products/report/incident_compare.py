"""The incident replays, fragile app vs tuned app: one table and one line of figures.

``python -m chaos_ext._products.report.incident_compare FRAGILE_DIR TUNED_DIR`` reads
the journals of ``experiments/incidents/`` run against each app (folders of
``journal-*.json``, as ``gameday sandbox run --journal-dir`` writes them) and
prints, per incident, each app's verdict, breaking point, error ratio of the
ramp and amplification, then the figures line::

    incidents eks_break_fragile_rps=15 eks_break_tuned_rps=60 \
nodelocal_errors_fragile=1 nodelocal_errors_tuned=0 latency_amplification=7.03

``eks_break_*_rps``: the load (req/s) at which incident 1's SLO broke; for an
app that never broke, the ramp's peak (a lower bound, said so in the table).
``nodelocal_errors_*``: incident 2's share of failed requests over the whole
ramp. ``latency_amplification``: incident 3's, fragile app. A figure that was
not measured prints ``nan``, and the exit code is then 1.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from chaos_ext._products.report.incidents import IncidentView
from chaos_ext._products.report.model import RunView, load_journal, view_of

__all__ = ["Side", "figures", "figures_line", "main", "read_side"]

INCIDENTS = {
    "eks": "01-eks-load-test",
    "nodelocal": "02-nodelocal-dns-stall",
    "latency": "03-app-db-latency",
}


@dataclass(frozen=True)
class Side:
    """One app's runs of the incidents, by incident key."""

    label: str
    views: Mapping[str, RunView]

    def incident(self, key: str) -> IncidentView | None:
        view = self.views.get(key)
        return view.incident if view is not None else None


def read_side(label: str, folder: Path) -> Side:
    """The latest journal of each incident in ``folder``."""
    views: dict[str, RunView] = {}
    for key, stem in INCIDENTS.items():
        found = sorted(folder.glob(f"journal-{stem}*.json"))
        if found:
            views[key] = view_of(load_journal(found[-1]), str(found[-1]))
    return Side(label, views)


def _break_rate(incident: IncidentView | None) -> tuple[float, bool]:
    """(the load at which the SLO broke, whether it broke); the peak if it held."""
    if incident is None:
        return math.nan, False
    if incident.breaking_point:
        return float(incident.breaking_point.get("rate") or math.nan), True
    return incident.held_to_rate if incident.held_to_rate is not None else math.nan, False


def _error_share(incident: IncidentView | None) -> float:
    if incident is None or not incident.scheduled:
        return math.nan
    return incident.errors / incident.scheduled


def _amplification(incident: IncidentView | None) -> float:
    value = (incident.amplification or {}).get("value") if incident else None
    return float(value) if isinstance(value, int | float) else math.nan


def figures(fragile: Side, tuned: Side) -> dict[str, float]:
    """The five figures of the line."""
    return {
        "eks_break_fragile_rps": _break_rate(fragile.incident("eks"))[0],
        "eks_break_tuned_rps": _break_rate(tuned.incident("eks"))[0],
        "nodelocal_errors_fragile": _error_share(fragile.incident("nodelocal")),
        "nodelocal_errors_tuned": _error_share(tuned.incident("nodelocal")),
        "latency_amplification": _amplification(fragile.incident("latency")),
    }


def _number(value: float) -> str:
    if math.isnan(value):
        return "nan"
    return f"{value:.4g}"


def figures_line(values: Mapping[str, float]) -> str:
    return "incidents " + " ".join(f"{k}={_number(v)}" for k, v in values.items())


def _row(key: str, side: Side) -> str:
    view = side.views.get(key)
    if view is None:
        return f"  {INCIDENTS[key]:<24} {side.label:<8} not run"
    incident = view.incident
    rate, broke = _break_rate(incident)
    slo = "no load figures"
    if incident is not None:
        slo = f"breaks at {rate:g} req/s" if broke else f"holds to {rate:g} req/s (peak)"
    parts = [
        f"  {INCIDENTS[key]:<24} {side.label:<8} {view.outcome:<9} {slo}",
        f"errors {_number(_error_share(incident))}",
    ]
    amplified = _amplification(incident)
    if not math.isnan(amplified):
        parts.append(f"amplification {amplified:g}")
    if incident is not None and incident.classes:
        parts.append(
            "; ".join(
                f"{c.get('error_class')} {100 * float(c.get('share') or 0):.0f} %"
                f" from {c.get('onset_rate')} req/s"
                for c in incident.classes
            )
        )
    return ", ".join(parts)


def table(fragile: Side, tuned: Side) -> list[str]:
    lines = [f"  {'incident':<24} {'app':<8} {'verdict':<9} SLO under the ramp, ..."]
    for key in INCIDENTS:
        lines += [_row(key, fragile), _row(key, tuned)]
    fragile_rate, _ = _break_rate(fragile.incident("eks"))
    tuned_rate, tuned_broke = _break_rate(tuned.incident("eks"))
    if fragile_rate and not math.isnan(fragile_rate) and not math.isnan(tuned_rate):
        bound = "" if tuned_broke else "at least "
        lines.append(
            f"  incident 1 breaking point: {fragile_rate:g} req/s -> {bound}{tuned_rate:g}"
            f" req/s, {bound}x{tuned_rate / fragile_rate:.2g}"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="incident_compare", description=__doc__)
    parser.add_argument("fragile", type=Path, help="journals of the fragile app's runs")
    parser.add_argument("tuned", type=Path, help="journals of the tuned app's runs")
    args = parser.parse_args(argv)
    fragile, tuned = read_side("fragile", args.fragile), read_side("tuned", args.tuned)
    values = figures(fragile, tuned)
    sys.stdout.write("\n".join([*table(fragile, tuned), figures_line(values)]) + "\n")
    return 1 if any(math.isnan(v) for v in values.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
