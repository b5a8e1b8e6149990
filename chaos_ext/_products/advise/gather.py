"""One ``gameday advise``: fetch what the request names, apply the rules, collect the risks.

Each source (the cluster, the database, a journal, Prometheus, the injector,
Envoy) is read on its own: one that cannot be read is a problem of the advice
(:attr:`Advice.problems`), the others are still read and judged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client

from chaos_ext._core.k8s import call, status_of
from chaos_ext._products.advise import fetch, rules
from chaos_ext._products.advise.risks import Advice, Risk
from chaos_ext.envoy.audit import run_audit
from chaos_ext.errors import ChaosExtError, KubernetesError
from chaos_ext.sidecar.probes import sidecar_drift

__all__ = ["AdviceRequest", "gather_advice"]


@dataclass(frozen=True)
class AdviceRequest:
    """What to read. ``namespaces`` empty: every namespace; ``node_label`` "": every node.

    ``db_dsn`` may hold a password: never in a repr or a message.
    """

    namespaces: tuple[str, ...] = ()
    pool: rules.PoolSource = field(default_factory=rules.PoolSource)
    db_dsn: str | None = field(default=None, repr=False)
    journals: tuple[Path, ...] = ()
    prometheus_url: str | None = None
    node_label: str = ""
    injector: tuple[str, str] = ("istio-system", "istio-sidecar-injector")
    sidecar_container: str = "istio-proxy"
    envoy: str | None = None


def _ceiling(request: AdviceRequest, advice: Advice) -> rules.Ceiling | None:
    """The lowest of the server's usable slots and every journal's measured ceiling."""
    found: list[tuple[int, str]] = []
    if request.db_dsn:
        try:
            settings = fetch.read_db_settings(request.db_dsn)
            found.append((settings.usable, settings.evidence()))
        except ChaosExtError as exc:
            advice.problems.append(f"database: {exc}")
    for path in request.journals:
        measured = fetch.journal_ceiling(path)
        if measured is None:
            advice.notes.append(f"journal {path}: no exhaust_connections hold was refused in it")
        else:
            found.append(measured)
    if not found:
        return None
    lowest = min(found, key=lambda item: item[0])
    others = [f"{n} from {text}" for n, text in found if (n, text) != lowest]
    also = f"; also {'; '.join(others)}" if others else ""
    return rules.Ceiling(lowest[0], f"{lowest[1]}{also}")


def _pool_ceiling(request: AdviceRequest, advice: Advice) -> rules.Ceiling | None:
    """The ceiling the pool rule compares with (None, and a note: the rule is not checked)."""
    if not (request.pool.env or request.pool.annotation):
        advice.notes.append("pool size: not checked (give --pool-env or --pool-annotation)")
        return None
    ceiling = _ceiling(request, advice)
    if ceiling is None:
        advice.notes.append("pool size: not checked (give --db-dsn or a --journal with a hold)")
    return ceiling


def _pool(
    request: AdviceRequest,
    objects: fetch.ClusterObjects,
    ceiling: rules.Ceiling | None,
    advice: Advice,
) -> None:
    if ceiling is None:
        return
    risk = rules.pool_risk(objects.deployments, objects.hpas, request.pool, ceiling)
    advice.risks += [risk] if risk else []


def _with_names(risk: Risk, url: str, advice: Advice) -> Risk:
    try:
        names = fetch.resolved_names(url)
    except ChaosExtError as exc:
        advice.problems.append(f"prometheus {url}: {exc}")
        return risk
    if names["absent"]:
        advice.notes.append(f"prometheus {url}: no coredns_dns_requests_total ({names['query']})")
        return Risk(risk.kind, risk.objects, risk.evidence, {**risk.details, "coredns": names})
    top = ", ".join(
        f"{'/'.join(str(v) for v in row['labels'].values()) or '-'} {row['requests']}"
        for row in names["top"][:5]
    )
    evidence = f"{risk.evidence}; CoreDNS's most asked last hour: {top}"
    return Risk(risk.kind, risk.objects, evidence, {**risk.details, "coredns": names})


def _sidecars(api: client.ApiClient, request: AdviceRequest, advice: Advice) -> None:
    namespace, name = request.injector
    try:
        call(
            client.CoreV1Api(api).read_namespaced_config_map,
            name,
            namespace,
            what=f"read ConfigMap {namespace}/{name}",
        )
    except KubernetesError as exc:
        if status_of(exc.__cause__ or exc) != 404:
            raise
        advice.notes.append(
            f"sidecar drift: not checked (no injector ConfigMap {namespace}/{name})"
        )
        return
    result = sidecar_drift(
        container_name=request.sidecar_container,
        configmap_name=name,
        configmap_namespace=namespace,
        include_namespaces=list(request.namespaces) or None,
    )
    if result.get("drifted_workloads"):
        objects = tuple(
            f"{w['kind']} {w['namespace']}/{w['name']}: {w['drifted']} pod(s); "
            + "; ".join(w.get("differences") or ())[:300]
            for w in result.get("drifted") or ()
        )
        evidence = (
            f"{result['drifted_pods']} pod(s) in {result['drifted_workloads']} workload(s) run a "
            f"sidecar that differs from what {namespace}/{name} injects today"
        )
        advice.risks.append(Risk("sidecar-drift", objects, evidence))


def _envoy(source: str, advice: Advice) -> None:
    run = run_audit(source)
    failed = [r for r in run.report["results"] if r.get("status") in ("fail", "unreadable")]
    if failed:
        objects = tuple(
            sorted(
                {f"{r['rule']} ({r.get('listener') or 'bootstrap'}): {r['title']}" for r in failed}
            )
        )
        evidence = f"{len(failed)} check(s) of the Envoy edge audit fail on {run.origin or source}"
        advice.risks.append(Risk("envoy-audit", objects, evidence))


def _cluster(
    api: client.ApiClient, request: AdviceRequest, ceiling: rules.Ceiling | None, advice: Advice
) -> None:
    objects = fetch.fetch_cluster(api, list(request.namespaces))
    ndots = rules.ndots_risk(objects.pods)
    if ndots and request.prometheus_url:
        ndots = _with_names(ndots, request.prometheus_url, advice)
    cache = rules.dns_cache_risk(objects.dns_deployments, objects.daemonsets)
    advice.risks += [r for r in (ndots, cache) if r is not None]
    _pool(request, objects, ceiling, advice)
    nodes = rules.pool_nodes(objects.nodes, request.node_label)
    if request.node_label and not nodes:
        advice.notes.append(f"node pool: no node has the label {request.node_label}")
    workloads = [*objects.deployments, *objects.statefulsets]
    for workload, kind in (
        (objects.deployments, "Deployment"),
        (objects.statefulsets, "StatefulSet"),
    ):
        for item in workload:
            item.setdefault("kind", kind)  # a list's items carry no kind
    advice.risks += rules.replica_risks(workloads, objects.pods, objects.pdbs, objects.hpas, nodes)


def gather_advice(api: client.ApiClient, request: AdviceRequest) -> Advice:
    """Every risk the request's sources show; a source that cannot be read is a problem.

    A journal that is not a journal raises InvalidArgument (bad input, nothing read yet).
    """
    advice = Advice()
    ceiling = _pool_ceiling(request, advice)
    steps: list[tuple[str, Callable[[], None]]] = [
        ("cluster", lambda: _cluster(api, request, ceiling, advice))
    ]
    steps.append(("sidecar drift", lambda: _sidecars(api, request, advice)))
    if request.envoy:
        envoy = request.envoy
        steps.append(("envoy", lambda: _envoy(envoy, advice)))
    for what, step in steps:
        try:
            step()
        except ChaosExtError as exc:
            advice.problems.append(f"{what}: {exc}")
    return advice
