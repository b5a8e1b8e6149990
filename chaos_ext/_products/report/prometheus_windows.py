"""The samples of a metric in a window of a run: from Prometheus, else from the journal.

For a metric that a PromQL probe gives (:class:`~.windows.MetricSpec` ``expr``),
the samples of a window are a range query over it at the scrape step, from the
window's start plus the query's lookback to its end (:mod:`.windows`), NaN
replaced by the probe's ``if_nan`` and missing steps by its ``if_empty`` as the
probe itself does. The Prometheus is the run's (its configuration's
``prometheus_url``, as the journal records or declares it) unless the
comparison names one.

The journal's own values in the window are used instead, and a note says why,
when: the comparison runs offline; Prometheus is unreachable (checked once per
URL, with a short timeout); it does not hold the run (a range query over a
series the journal recorded does not give the journal's values back: a
sandbox's Prometheus that was taken down and brought up again, say); it has no
sample in the window (dropped by retention); or the query gives several series.
The scrape step is read from Prometheus' own samples of ``up`` (the spacing of
its raw samples), else the probe's step, else 15 s.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from chaos_ext._core.prometheus_api.client import PrometheusClient, client
from chaos_ext._core.timeline import Span, journal_vars
from chaos_ext._products.report.windows import MetricSpec, Run, Sampled, journal_samples
from chaos_ext.errors import ChaosExtError, InvalidArgument

__all__ = ["DEFAULT_STEP_S", "WindowSampler"]

DEFAULT_STEP_S = 15.0
"""The step when neither Prometheus nor the probe says (Prometheus' default scrape)."""
_MATCH = 1e-6


@dataclass
class _Server:
    url: str
    client: PrometheusClient | None
    problem: str = ""
    steps: dict[float, float] = field(default_factory=dict)


def _values(result: Any) -> list[list[tuple[float, float]]]:
    return [
        [(float(t), float(v)) for t, v in element.get("values") or []]
        for element in result or []
        if isinstance(element, Mapping)
    ]


def _same(prom: PrometheusClient, expr: str, points: tuple[tuple[float, float], ...]) -> str:
    """ "" when Prometheus gives the recorded points back, else why not."""
    step = points[1][0] - points[0][0]
    try:
        rows = _values(prom.range(expr, start=points[0][0], end=points[-1][0], step=step))
    except ChaosExtError as exc:
        return str(exc)
    answered = {round(t, 3): v for t, v in rows[0]} if len(rows) == 1 else {}
    same = [
        math.isclose(answered[round(t, 3)], v, rel_tol=_MATCH, abs_tol=1e-9)
        for t, v in points
        if round(t, 3) in answered and math.isfinite(answered[round(t, 3)])
    ]
    if len(same) * 2 >= len(points) and all(same):
        return ""
    return "its samples differ from those the run recorded: not the run's Prometheus"


def _scrape_step(prom: PrometheusClient, at: float) -> float | None:
    """The spacing of Prometheus' raw ``up`` samples in the minute before ``at``."""
    try:
        rows = _values(prom.instant("up[1m]", at=at))
    except ChaosExtError:
        return None
    gaps = sorted(b[0] - a[0] for row in rows for a, b in itertools.pairwise(row))
    return gaps[len(gaps) // 2] if gaps else None


def _slots(
    got: Mapping[float, float], start: float, end: float, step: float, spec: MetricSpec
) -> tuple[tuple[float, float], ...]:
    """Each step's value as the probe would give it: NaN as ``if_nan``, a missing step
    as ``if_empty`` (dropped when the probe gives neither)."""
    found = []
    for i in range(int((end - start) // step) + 1):
        t = start + i * step
        value = got.get(round(t, 3), spec.if_empty)
        if value is not None and math.isnan(value):
            value = spec.if_nan
        if value is not None and math.isfinite(value):
            found.append((t, value))
    return tuple(found)


class WindowSampler:
    """A :data:`~chaos_ext._products.report.compare.Sampler` (module docstring);
    ``notes`` says, once each, where the journals stood in for Prometheus and why."""

    def __init__(
        self, *, url: str | None = None, offline: bool = False, timeout_s: float = 5.0
    ) -> None:
        self.url, self.offline, self.timeout_s = url, offline, timeout_s
        self.notes: list[str] = []
        self.used: set[str] = set()  # where samples came from: "prometheus", "journal"
        self._servers: dict[str, _Server] = {}
        self._holds: dict[str, str] = {}  # run -> "" (holds it) or why not

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def _server(self, url: str) -> _Server:
        if url not in self._servers:
            settings = {
                "prometheus_url": url,
                "prometheus_timeout_seconds": self.timeout_s,
                "prometheus_retries": 0,
            }
            server = _Server(url, None)
            try:
                found = client(settings, None)
                found.instant("vector(1)")
                server.client = found
            except (ChaosExtError, InvalidArgument) as exc:
                server.problem = str(exc).rstrip(": ")
            self._servers[url] = server
        return self._servers[url]

    def _holds_run(self, prom: PrometheusClient, run: Run) -> str:
        """ "" when Prometheus gives back a series the journal recorded (or the journal
        has none to check against), else why not."""
        key = run.view.source or run.view.run_id
        if key not in self._holds:
            self._holds[key] = ""
            for spec in run.specs.values():
                series = next((s for s in run.view.series if s.name == spec.name), None)
                if spec.expr and series and not series.discrete and len(series.points) > 1:
                    self._holds[key] = _same(prom, spec.expr, series.points)
                    break
        return self._holds[key]

    def __call__(self, run: Run, spec: MetricSpec, span: Span) -> Sampled:
        """The metric's samples in ``span`` of the run (module docstring)."""
        own = Sampled(tuple(journal_samples(run.view, spec, span)), "journal")
        found = self._prometheus(run, spec, span, own)
        self.used.add(found.source)
        return found

    def _prometheus(self, run: Run, spec: MetricSpec, span: Span, own: Sampled) -> Sampled:
        if spec.expr is None or self.offline:
            return own
        values = journal_vars(run.journal)
        url = self.url or str(
            values.get("prometheus_url") or values.get("prometheus_base_url") or ""
        )
        if not url:
            return own
        server = self._server(url)
        if server.client is None:
            self._note(f"{server.problem}; the journals' own samples instead")
            return own
        why = self._holds_run(server.client, run)
        if why:
            self._note(
                f"Prometheus at {url} ({run.view.title}): {why}; the journal's own samples instead"
            )
            return own
        return self._query(server, server.client, spec, span, own)

    def _query(
        self, server: _Server, prom: PrometheusClient, spec: MetricSpec, span: Span, own: Sampled
    ) -> Sampled:
        end = span.end if span.end is not None else span.start
        key = round(end, -2)
        if key not in server.steps:
            server.steps[key] = _scrape_step(prom, end) or spec.step or DEFAULT_STEP_S
        step = server.steps[key]
        start = math.ceil((span.start + spec.lookback) / step) * step
        if start > end or spec.expr is None:
            return Sampled((), "prometheus", step)  # nothing lies wholly inside the window
        try:
            rows = _values(prom.range(spec.expr, start=start, end=end, step=step))
        except ChaosExtError as exc:
            self._note(f"{spec.name}: {exc}; the journal's own samples instead")
            return own
        if len(rows) > 1:
            self._note(
                f"{spec.name}: the query gives {len(rows)} series; the journal's own samples"
            )
            return own
        if not rows and spec.if_empty is None:
            self._note(
                f"{spec.name}: Prometheus at {server.url} has no sample in a window (dropped by "
                "its retention?); the journal's own samples there"
            )
            return own
        got = {round(t, 3): v for t, v in rows[0]} if rows else {}
        return Sampled(_slots(got, start, end, step, spec), "prometheus", step)
