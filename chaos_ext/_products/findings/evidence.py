"""What a run's journal shows, as evidence for a finding (pure: journal + timeline in).

* the **faults** that were on (the timeline's ledger entries of role ``fault``);
* the **error classes** of each load, with their onset (``chaos_ext.load.onset``): from an
  ``error_onset`` probe's output, or from the per-second buckets a ``stop_http_load``
  rollback returned; the class that began first is the first one of the list;
* the **method activities**' figures (probes and actions): a number, a field of a dict
  output, or a series' peak (with the time it first crossed a rule's threshold);
* the **deviations**: each hypothesis probe's first measurement out of tolerance, and its
  window (``chaos_ext._core.timeline``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaos_ext._core.timeline import (
    EntrySpan,
    Timeline,
    epoch,
    journal_vars,
    substitute,
    timeline_of,
)
from chaos_ext._core.timeline.journal import mappings, number
from chaos_ext.load.onset import BucketCounts, error_classes

__all__ = ["Deviation", "ErrorOnset", "MetricValue", "RunEvidence", "evidence_of", "metric_of"]

_ONSET = ("chaos_ext.load.probes", "error_onset")
_STOP_LOAD = ("chaos_ext.load.actions", "stop_http_load")


@dataclass(frozen=True)
class ErrorOnset:
    """One class of a load's errors: how many, and where it began."""

    error_class: str
    count: int
    onset_rate: float | None  # req/s scheduled in its first second
    onset_at: float | None  # epoch seconds (None: the load's start is not in the journal)
    load: str  # the load's name or ledger id


@dataclass(frozen=True)
class MetricValue:
    """A method probe's figure: ``key`` of its output ("" the number, or a series' peak)."""

    probe: str
    key: str
    value: float
    series: tuple[tuple[float, float], ...] = ()  # (epoch, value) when the output was a series
    at: float | None = None  # when the activity measured it (a single figure)

    def first_time(self, above: float | None, below: float | None) -> float | None:
        """When the figure first crossed the limits: a series' first such point, a single
        figure's own time (None: never, or unknown)."""
        if not self.series:
            return self.at
        for at, value in self.series:
            if (above is None or value > above) and (below is None or value < below):
                return at
        return None


@dataclass(frozen=True)
class Deviation:
    """A hypothesis probe's first measurement out of tolerance."""

    probe: str
    window: str
    at: float
    text: str


@dataclass(frozen=True)
class RunEvidence:
    """Everything a rule may look at, for one run."""

    title: str
    experiment: str  # the experiment's path when the journal names it
    outcome: str
    timeline: Timeline
    faults: tuple[EntrySpan, ...]
    errors: tuple[ErrorOnset, ...]  # the first class to begin first
    outputs: Mapping[str, Any]  # method activity name -> its output
    ended: Mapping[str, float]  # method activity name -> when it ended (epoch)
    deviations: tuple[Deviation, ...]

    @property
    def first_error(self) -> ErrorOnset | None:
        return self.errors[0] if self.errors else None

    def metric(self, probe: str, key: str) -> MetricValue | None:
        """The figure of method activity ``probe`` (its output's ``key``), or None."""
        found = metric_of(probe, key, self.outputs.get(probe))
        if found is None or found.series:
            return found
        return MetricValue(found.probe, key, found.value, at=self.ended.get(probe))

    def any_key(self, key: str) -> MetricValue | None:
        """The first method activity's figure ``key`` (in the method's order), or None."""
        found = (self.metric(name, key) for name in self.outputs)
        return next((f for f in found if f is not None), None)

    def since_start(self, at: float) -> str:
        return f"+{at - self.timeline.start:.1f} s"


def metric_of(probe: str, key: str, output: Any) -> MetricValue | None:
    """A number from an output: itself, ``output[key]``, or the peak of ``output["series"]``."""
    if isinstance(output, bool):
        return MetricValue(probe, key, float(output))
    if key:
        value = number(output.get(key)) if isinstance(output, Mapping) else None
        return None if value is None else MetricValue(probe, key, value)
    value = number(output)
    if value is not None:
        return MetricValue(probe, key, value)
    if isinstance(output, Mapping) and isinstance(output.get("series"), list):
        points = [
            (float(p[0]), float(p[1]))
            for p in output["series"]
            if isinstance(p, list | tuple)
            and len(p) == 2
            and number(p[0]) is not None
            and number(p[1]) is not None
        ]
        if points:
            return MetricValue(probe, key, max(v for _, v in points), tuple(points))
    return None


def _provider(run: Mapping[str, Any]) -> tuple[str, str]:
    provider = (run.get("activity") or {}).get("provider") or {}
    return str(provider.get("module", "")), str(provider.get("func", ""))


def _load_starts(journal: Mapping[str, Any]) -> dict[str, float]:
    """Each load's start (epoch) by its ledger id, from ``drive_http_load``'s output."""
    starts = {}
    for run in mappings(journal.get("run")):
        out = run.get("output")
        if isinstance(out, Mapping) and out.get("ledger_id") and number(out.get("start")):
            starts[str(out["ledger_id"])] = float(out["start"])
    return starts


def _counts_of(value: Any) -> dict[str, int]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): int(v) for k, v in value.items() if number(v)}


def _bucket(raw: Mapping[str, Any]) -> BucketCounts | None:
    offset, scheduled = number(raw.get("offset_seconds")), number(raw.get("scheduled"))
    if offset is None or scheduled is None:
        return None
    rate = number(raw.get("scheduled_rate"))
    errors = _counts_of(raw.get("errors"))
    causes = _counts_of(raw.get("causes"))
    return BucketCounts(
        offset_seconds=offset,
        seconds=scheduled / rate if rate and scheduled else 1.0,
        scheduled=int(scheduled),
        errors=errors,
        dropped=int(number(raw.get("dropped")) or 0),
        causes=causes,
    )


def _onsets(
    classes: Sequence[Mapping[str, Any]], start: float | None, load: str
) -> list[ErrorOnset]:
    found = []
    for c in classes:
        offset = number(c.get("onset_offset_seconds"))
        found.append(
            ErrorOnset(
                error_class=str(c.get("error_class")),
                count=int(number(c.get("count")) or 0),
                onset_rate=number(c.get("onset_rate")),
                onset_at=None if offset is None or start is None else start + offset,
                load=load,
            )
        )
    return found


def _classes(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A load's classes from its per-second buckets; without them (a journal that kept only
    the totals), from the totals as one bucket, with no onset."""
    buckets = [b for b in map(_bucket, mappings(results.get("buckets"))) if b]
    if buckets:
        return [c.as_dict() for c in error_classes(buckets)]
    total = _bucket({**results, "offset_seconds": 0.0})
    if total is None:
        return []
    return [
        {**c.as_dict(), "onset_offset_seconds": None, "onset_rate": None}
        for c in error_classes([total])
    ]


def _load_errors(journal: Mapping[str, Any], ours: frozenset[str]) -> list[ErrorOnset]:
    """The error classes of the run's own loads (ledger ids ``ours``; empty: every load the
    journal names), the earliest onset first (then the largest class). A rollback that
    stops loads by name also returns earlier runs' loads of that name: those are left out."""
    starts = _load_starts(journal)
    found: list[ErrorOnset] = []
    for run in [*mappings(journal.get("run")), *mappings(journal.get("rollbacks"))]:
        out = run.get("output")
        if not isinstance(out, Mapping):
            continue
        if _provider(run) == _ONSET:
            load = str(out.get("ledger_id", ""))
            found += _onsets(mappings(out.get("classes")), starts.get(load), load)
        elif _provider(run) == _STOP_LOAD and isinstance(out.get("results"), Mapping):
            for load, results in out["results"].items():
                if not isinstance(results, Mapping):
                    continue
                found += _onsets(_classes(results), starts.get(str(load)), str(load))
    seen: set[tuple[str, str]] = set()
    unique = []
    for onset in found:  # an error_onset probe and the rollback may report the same load
        if ours and onset.load not in ours:
            continue
        if (onset.load, onset.error_class) not in seen:
            seen.add((onset.load, onset.error_class))
            unique.append(onset)
    return sorted(
        unique,
        key=lambda o: (o.onset_at is None, o.onset_at or 0.0, -o.count, o.error_class),
    )


def _succeeded(journal: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r for r in mappings(journal.get("run")) if r.get("status") == "succeeded"]


def _name(run: Mapping[str, Any]) -> str:
    return str((run.get("activity") or {}).get("name"))


def _deviations(timeline: Timeline) -> tuple[Deviation, ...]:
    first: dict[str, Deviation] = {}
    for m in sorted(timeline.measurements, key=lambda m: m.at):
        if m.hypothesis and m.tolerance_met is False and m.window != "before":
            text = m.text or (m.error and f"error: {m.error}") or "-"
            first.setdefault(m.probe, Deviation(m.probe, m.window, m.at, text))
    return tuple(first.values())


def evidence_of(journal: Mapping[str, Any], outcome: str, source: str = "") -> RunEvidence:
    """The evidence of one journal whose hypothesis outcome is ``outcome``."""
    timeline = timeline_of(journal)
    gameday = journal.get("gameday") or {}
    experiment = journal.get("experiment") or {}
    return RunEvidence(
        title=substitute(str(experiment.get("title") or source or "?"), journal_vars(journal)),
        experiment=str(gameday.get("experiment_path") or ""),
        outcome=outcome,
        timeline=timeline,
        faults=timeline.faults(),
        errors=tuple(_load_errors(journal, frozenset(e.id for e in timeline.loads()))),
        outputs={_name(r): r.get("output") for r in _succeeded(journal)},
        ended={_name(r): t for r in _succeeded(journal) if (t := epoch(r.get("end"))) is not None},
        deviations=_deviations(timeline),
    )
