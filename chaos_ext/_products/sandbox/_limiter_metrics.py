"""The DNS packet-rate limit's counters for Prometheus (the sandbox exporter registers this).

While ``limit_dns_rate`` holds a namespace (the app's: the sandbox's "node"),
its nftables counters are exposed as::

    gameday_dns_rate_limit_active{netns}                      1 while a limit is loaded
    gameday_dns_rate_limit_packets_total{netns}               DNS packets that tried to leave
    gameday_dns_rate_limit_dropped_packets_total{netns}       the ones over the limit, dropped

(counters restart at 0 with each new limit; ``rate()`` handles the reset).
They are read with :func:`chaos_ext.dns.probes.dns_rate_limit_drops`, which
lists only our tables: nothing else of the namespace's ruleset is read.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from chaos_ext.dns.probes import dns_rate_limit_drops
from chaos_ext.errors import ChaosExtError

__all__ = ["RateLimitCollector"]

_log = logging.getLogger(__name__)


class RateLimitCollector(Collector):
    """Counters of the DNS rate limit in network namespace ``netns``."""

    def __init__(self, netns: str) -> None:
        self.netns = netns

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        try:
            found = dns_rate_limit_drops(target=f"netns:{self.netns}")
        except ChaosExtError as exc:  # an unreadable limit shows as a missing series
            _log.warning("cannot read the DNS rate limit of %s: %s", self.netns, exc)
            return
        text = "Whether a DNS rate limit is loaded"
        active = GaugeMetricFamily("gameday_dns_rate_limit_active", text, labels=["netns"])
        active.add_metric([self.netns], 1.0 if found["active"] else 0.0)
        yield active
        for name, key, text in (
            ("gameday_dns_rate_limit_packets", "packets", "DNS packets that tried to leave"),
            ("gameday_dns_rate_limit_dropped_packets", "dropped", "DNS packets dropped"),
        ):
            family = CounterMetricFamily(name, text, labels=["netns"])
            family.add_metric([self.netns], float(found[key]))
            yield family
