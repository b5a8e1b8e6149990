"""The sandbox exporter: dnsmasq processes and PostgreSQL connections for Prometheus.

Metric names follow the exporters a real cluster has, so the probe catalog's
queries work unchanged against the sandbox:

* ``container_processes{container="dnsmasq", namespace="sandbox"}`` (cAdvisor): dnsmasq processes,
  i.e. the main process plus the children it forks for TCP queries;
* ``pg_stat_activity_count{datname,state}`` and ``pg_settings_max_connections``
  (postgres_exporter);
* with ``--limit-netns``, the DNS packet-rate limit's counters
  (:mod:`chaos_ext._products.sandbox._limiter_metrics`).

Run: ``python -m chaos_ext._products.sandbox._exporter --listen 0.0.0.0:9187
--dnsmasq-pidfile F ...``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from chaos_ext._core import procfs as _procfs

__all__ = ["count_process_tree", "main"]


def count_process_tree(pid: int) -> int:
    """Processes in the tree rooted at ``pid`` (0 when it is gone)."""
    return _procfs.tree_size(pid)


class SandboxCollector(Collector):
    def __init__(self, dnsmasq_pidfile: Path, dsn: dict[str, Any]) -> None:
        self.pidfile = dnsmasq_pidfile
        self.dsn = dsn

    def collect(self) -> Iterator[GaugeMetricFamily]:
        procs = GaugeMetricFamily(
            "container_processes", "Processes in the container", labels=["container", "namespace"]
        )
        try:
            count = count_process_tree(int(self.pidfile.read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            count = 0
        procs.add_metric(["dnsmasq", "sandbox"], count)
        yield procs
        yield from self._postgres()

    def _postgres(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily("pg_up", "Whether PostgreSQL answered the exporter")
        try:
            with psycopg.connect(**self.dsn, connect_timeout=2) as conn:
                rows = conn.execute(
                    "SELECT datname, state, count(*) FROM pg_stat_activity"
                    " WHERE backend_type = 'client backend' GROUP BY 1, 2"
                ).fetchall()
                max_conn = conn.execute("SHOW max_connections").fetchone()
        except psycopg.Error:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        activity = GaugeMetricFamily(
            "pg_stat_activity_count",
            "Connections by database and state",
            labels=["datname", "state"],
        )
        for datname, state, count in rows:
            activity.add_metric([datname or "", state or "unknown"], count)
        yield activity
        settings = GaugeMetricFamily("pg_settings_max_connections", "max_connections")
        settings.add_metric([], float(max_conn[0]) if max_conn else 0.0)
        yield settings


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="sandbox-exporter", description=__doc__)
    p.add_argument("--listen", default="0.0.0.0:9187")
    p.add_argument("--dnsmasq-pidfile", type=Path, required=True)
    p.add_argument("--db-host", required=True)
    p.add_argument("--db-port", type=int, default=5432)
    p.add_argument("--db-user", default="app")
    p.add_argument("--db-name", default="app")
    p.add_argument("--db-password-file", type=Path, required=True)
    p.add_argument(
        "--limit-netns", default="", help="expose the DNS rate limit's counters of this namespace"
    )
    a = p.parse_args(argv)
    dsn = {
        "host": a.db_host,
        "port": a.db_port,
        "user": a.db_user,
        "dbname": a.db_name,
        "password": a.db_password_file.read_text().strip(),
    }
    registry = CollectorRegistry()
    registry.register(SandboxCollector(a.dnsmasq_pidfile, dsn))
    if a.limit_netns:
        from chaos_ext._products.sandbox._limiter_metrics import RateLimitCollector  # noqa: PLC0415

        registry.register(RateLimitCollector(a.limit_netns))
    host, _, port = a.listen.rpartition(":")
    start_http_server(int(port), addr=host, registry=registry)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
