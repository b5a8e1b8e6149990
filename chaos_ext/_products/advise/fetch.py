"""The thin fetchers of ``gameday advise``: read-only, every call with a timeout.

Kubernetes: LIST (and one GET of the injector ConfigMap) through
:mod:`chaos_ext._core.k8s`; the database: one ``SELECT`` of its settings over a
read-only session; a journal: the result of ``exhaust_connections``;
Prometheus: one instant query per attempt.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kubernetes import client

from chaos_ext._core.k8s import list_items
from chaos_ext._core.prometheus_api.client import PrometheusClient, settings_from
from chaos_ext.db.errors import DatabaseError
from chaos_ext.errors import InvalidArgument

__all__ = [
    "COREDNS_QUERIES",
    "ClusterObjects",
    "DbSettings",
    "fetch_cluster",
    "journal_ceiling",
    "read_db_settings",
    "resolved_names",
]

Manifest = dict[str, Any]


@dataclass
class ClusterObjects:
    """What the rules read, as the API returned it (namespaced kinds: the chosen namespaces)."""

    pods: list[Manifest] = field(default_factory=list)
    deployments: list[Manifest] = field(default_factory=list)
    statefulsets: list[Manifest] = field(default_factory=list)
    hpas: list[Manifest] = field(default_factory=list)
    pdbs: list[Manifest] = field(default_factory=list)
    nodes: list[Manifest] = field(default_factory=list)
    dns_deployments: list[Manifest] = field(default_factory=list)  # kube-system's
    daemonsets: list[Manifest] = field(default_factory=list)  # every namespace's


def _listed(
    namespaced: Callable[..., Any], everywhere: Callable[..., Any], what: str, namespaces: list[str]
) -> list[Manifest]:
    if not namespaces:
        return list_items(everywhere, what=f"list {what} in every namespace")
    found: list[Manifest] = []
    for namespace in namespaces:
        found += list_items(namespaced, namespace, what=f"list {what} in namespace {namespace}")
    return found


def fetch_cluster(api: client.ApiClient, namespaces: list[str]) -> ClusterObjects:
    """LIST the objects the rules read (``namespaces`` empty: every namespace)."""
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    policy, scaling = client.PolicyV1Api(api), client.AutoscalingV2Api(api)
    return ClusterObjects(
        pods=_listed(
            core.list_namespaced_pod, core.list_pod_for_all_namespaces, "pods", namespaces
        ),
        deployments=_listed(
            apps.list_namespaced_deployment,
            apps.list_deployment_for_all_namespaces,
            "deployments",
            namespaces,
        ),
        statefulsets=_listed(
            apps.list_namespaced_stateful_set,
            apps.list_stateful_set_for_all_namespaces,
            "statefulsets",
            namespaces,
        ),
        hpas=_listed(
            scaling.list_namespaced_horizontal_pod_autoscaler,
            scaling.list_horizontal_pod_autoscaler_for_all_namespaces,
            "horizontalpodautoscalers",
            namespaces,
        ),
        pdbs=_listed(
            policy.list_namespaced_pod_disruption_budget,
            policy.list_pod_disruption_budget_for_all_namespaces,
            "poddisruptionbudgets",
            namespaces,
        ),
        nodes=list_items(core.list_node, what="list nodes"),
        dns_deployments=list_items(
            apps.list_namespaced_deployment, "kube-system", what="list deployments in kube-system"
        ),
        daemonsets=list_items(
            apps.list_daemon_set_for_all_namespaces, what="list daemonsets in every namespace"
        ),
    )


@dataclass(frozen=True)
class DbSettings:
    """PostgreSQL's connection settings: the slots a normal (non-superuser) role can take."""

    max_connections: int
    superuser_reserved: int
    reserved: int  # PostgreSQL 16's reserved_connections (0 before 16)

    @property
    def usable(self) -> int:
        return self.max_connections - self.superuser_reserved - self.reserved

    def evidence(self) -> str:
        return (
            f"max_connections {self.max_connections} - superuser_reserved_connections "
            f"{self.superuser_reserved} - reserved_connections {self.reserved}"
        )


_SETTINGS_SQL = (
    "SELECT current_setting('max_connections')::int,"
    " current_setting('superuser_reserved_connections')::int,"
    " coalesce(current_setting('reserved_connections', true), '0')::int"
)


def _where(dsn: str) -> str:
    """The server a DSN names, without its credentials."""
    parts = urlsplit(dsn)
    if parts.scheme.startswith("postgres"):
        return f"postgresql://{parts.hostname}:{parts.port or 5432}{parts.path}"
    return "the PostgreSQL server of --db-dsn"


def read_db_settings(dsn: str) -> DbSettings:
    """The server's connection settings, read in a read-only session (5 s to connect)."""
    import psycopg  # noqa: PLC0415 - the driver only when a DSN is given

    try:
        with psycopg.connect(
            dsn, connect_timeout=5, autocommit=True, application_name="gameday-advise"
        ) as conn:
            conn.execute("SET default_transaction_read_only = on")
            conn.execute("SET statement_timeout = 5000")
            row = conn.execute(_SETTINGS_SQL).fetchone()
    except psycopg.Error as exc:  # the DSN's password never reaches the message
        text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise DatabaseError(f"cannot read {_where(dsn)}: {text}") from None
    if row is None:
        raise DatabaseError(f"cannot read {_where(dsn)}: no answer to the settings query")
    return DbSettings(int(row[0]), int(row[1]), int(row[2]))


def _exhaust_outputs(journal: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    for run in journal.get("run") or ():
        provider = (run.get("activity") or {}).get("provider") or {}
        output = run.get("output")
        if provider.get("func") == "exhaust_connections" and isinstance(output, dict):
            yield output


def journal_ceiling(path: Path) -> tuple[int, str] | None:
    """The connections the server took when ``exhaust_connections`` was refused, in a journal.

    ``refused_at`` (connections the holder opened, the refused one's predecessors)
    plus ``in_use_before`` (other clients' connections when it began); the lowest
    over the journal's holds. None: no hold in this journal was refused.
    """
    try:
        journal = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InvalidArgument(f"--journal {path}: cannot read it as JSON: {exc}") from exc
    if not isinstance(journal, dict):
        raise InvalidArgument(f"--journal {path}: not a Chaos Toolkit journal (a JSON object)")
    measured = [
        (int(out["refused_at"]) + int(out.get("in_use_before") or 0), out)
        for out in _exhaust_outputs(journal)
        if out.get("refused") and out.get("refused_at") is not None
    ]
    if not measured:
        return None
    connections, out = min(measured, key=lambda item: item[0])
    return connections, (
        f"{path.name}: exhaust_connections refused at {out['refused_at']} with "
        f"{int(out.get('in_use_before') or 0)} other connection(s) open"
    )


COREDNS_QUERIES = (
    'topk(10, sum by (name) (increase(coredns_dns_requests_total{name!=""}[1h])))',
    "topk(10, sum by (zone, type) (increase(coredns_dns_requests_total[1h])))",
)
"""What :func:`resolved_names` asks: names when a plugin labels them, else zone and type."""


def resolved_names(url: str) -> dict[str, Any]:
    """The names (else zones/types) CoreDNS answered most over the last hour, and the query.

    ``{"query": ..., "top": [{"labels": {...}, "requests": n}], "absent": bool}``.
    """
    prom = PrometheusClient(settings_from({"prometheus_url": url}, {}))
    for query in COREDNS_QUERIES:
        result = prom.instant(query)
        rows = [
            {"labels": dict(item.get("metric") or {}), "requests": round(float(item["value"][1]))}
            for item in result or ()
        ]
        if rows:
            return {"query": query, "top": rows, "absent": False}
    return {"query": " ; ".join(COREDNS_QUERIES), "top": [], "absent": True}
