"""Replay an alerting rule's recent past, so a watch that starts late fires on time.

Shared by the stop-condition watch (:mod:`chaos_ext.controls.stop_conditions`)
and the ``alerts_quiet`` probe (:mod:`chaos_ext.prometheus.probes`).
"""

from __future__ import annotations

from chaos_ext._core.prometheus_api.alertstate import RuleState, replay_times
from chaos_ext._core.prometheus_api.client import PrometheusClient
from chaos_ext._core.prometheus_api.results import parse_range

__all__ = ["restore"]


def restore(prom: PrometheusClient, state: RuleState, now: float, interval: float) -> None:
    """Replay a rule's recent past (``for`` + ``keep_firing_for``) through a range query,
    so an alert already pending when the watch starts fires when Prometheus would.

    The replay starts no earlier than the Prometheus process (its rule manager
    could not have been pending before); without that time (a query frontend
    such as Thanos), there is no replay: an alert then fires ``for`` after the
    watch first sees it, later than Prometheus might, never earlier.
    """
    if state.rule.for_s <= 0 and state.rule.keep_firing_for_s <= 0:
        return
    started = prom.start_time()  # before that, Prometheus could not have been pending either
    if started is None:  # (absent() answers for times it has no data): no replay, never early
        return
    start, end, step = replay_times(state.rule, now, interval)
    start = round(max(start, started), 3)
    if start >= end:
        return
    count = int((end - start) // step) + 1
    times = [round(start + k * step, 3) for k in range(count)]
    series = parse_range(
        prom.range(state.rule.expr, start=start, end=times[-1], step=step), state.rule.expr
    )
    state.replay(series, times)
