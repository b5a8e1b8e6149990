"""Envoy probes: audit the live edge configuration."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chaos_ext._core.contract import Configuration, Secrets
from chaos_ext._core.prometheus_api.client import client
from chaos_ext._core.prometheus_api.promql import check_promql, matchers
from chaos_ext._core.prometheus_api.results import parse_instant, shown
from chaos_ext._core.rbac import Rule, needs_k8s
from chaos_ext._core.validation import validated_by
from chaos_ext.envoy._fix_heap import heap_rule
from chaos_ext.envoy._gateway import parse_quantity
from chaos_ext.envoy._overload import connections_query, overload_query, overload_summary
from chaos_ext.envoy._pipeline import check_audit_arguments, run_audit
from chaos_ext.envoy._profiles import DEFAULT_PROFILE
from chaos_ext.errors import EmptyResult, InvalidArgument

__all__ = ["edge_config_audit", "overload_state"]


def _check_edge_audit(arguments: Mapping[str, Any]) -> None:
    check_audit_arguments(arguments)
    _memory_limit(arguments.get("memory_limit", ""))


def _memory_limit(text: Any) -> int | None:
    """Bytes of ``memory_limit`` (a Kubernetes quantity), None when not given."""
    if text in ("", None):
        return None
    if not isinstance(text, str):
        raise InvalidArgument(
            f"memory_limit: expected a Kubernetes quantity string such as '1024Mi', got {text!r}"
        )
    return parse_quantity(text, what="memory_limit")


@needs_k8s(
    # only for source pod://...: find the pod, then exec pilot-agent in it. The
    # Python client's exec is a websocket GET: "get" before Kubernetes 1.30,
    # "create" since (as for kubectl exec).
    Rule("", "pods", ("get", "list")),
    Rule("", "pods/exec", ("create", "get")),
)
@validated_by(_check_edge_audit)
def edge_config_audit(
    source: str,
    listener: str = "",
    rules: list[dict[str, Any]] | None = None,
    rules_file: str = "",
    timeout_seconds: float = 30.0,
    profile: str = DEFAULT_PROFILE,
    role: str = "auto",
    memory_limit: str = "",
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Audit an Envoy configuration (live /config_dump or bootstrap) against a rule profile.

    Read-only: one GET of the admin /config_dump (``http://host:15000``), a
    saved dump or bootstrap file (JSON or YAML), ``-`` for stdin, or
    ``pod://NAMESPACE/NAME`` (``pod://NAMESPACE?selector=istio=ingressgateway``),
    which execs ``pilot-agent request GET config_dump`` in the pod's
    ``istio-proxy`` container, within ``timeout_seconds``. No rollback needed.

    ``profile``: ``envoy-edge`` (Envoy's edge best practices, the default),
    ``hardened`` (stricter) or ``sidecar``. A sidecar's configuration is
    recognised and refused by the edge profiles (``role`` overrides what is
    detected). ``listener``: audit only this listener. ``rules``/``rules_file``:
    override rules by id, or add rules (docs/envoy.md). ``memory_limit``: the
    proxy container's ``resources.limits.memory`` (a Kubernetes quantity,
    ``1024Mi``), as ``gameday audit envoy --memory-limit`` takes it: adds the
    rule ``overload-heap-below-memory-limit``, which fails a fixed_heap limit
    at or above it (the kernel would OOM-kill Envoy before the overload
    actions fire). Returns ``passed``,
    the input kind, the proxy role and, per rule and target, ``status``
    (pass/fail/unreadable/warn/not-in-input), ``expected``, ``found``, ``path``
    and the rule's source. Pair with a ``jsonpath`` tolerance on ``$.passed``.
    """
    limit = _memory_limit(memory_limit)
    extra = [] if limit is None else [heap_rule(limit, f"memory_limit {memory_limit}")]
    return run_audit(
        source,
        listener=listener,
        rules=rules,
        rules_file=rules_file,
        timeout_seconds=timeout_seconds,
        profile=profile,
        role=role,
        secrets=secrets,
        extra_rules=extra,
    ).report


def _labels(job: str, selector: Mapping[str, Any] | None) -> str:
    if selector is not None and not isinstance(selector, dict):
        raise InvalidArgument(f"selector: expected a mapping of label matchers, got {selector!r}")
    labels = {"job": job} if job else {}
    labels.update({str(k): str(v) for k, v in (selector or {}).items()})
    return matchers(labels)


def _check_overload(arguments: Mapping[str, Any]) -> None:
    selected = _labels(str(arguments.get("job", "envoy")), arguments.get("selector"))
    check_promql(overload_query(selected), "overload_state")
    check_promql(connections_query(selected), "overload_state")


@validated_by(_check_overload)
def overload_state(
    job: str = "envoy",
    selector: dict[str, str] | None = None,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Read Envoy's overload-manager state from Prometheus (envoy_overload_* metrics).

    Read-only: two instant queries (``prometheus_url`` in the configuration).
    Envoys are selected by ``job`` plus ``selector`` label matchers (``{"namespace":
    "istio-system", "pod": "~istio-ingressgateway-.*"}``; ``~`` for a regex).
    Returns, as the highest value across those Envoys: ``active`` (how many
    overload actions are active), ``active_actions``, ``stop_accepting_requests``
    (bool), ``actions`` (active / scale_percent per action), ``pressure_percent``
    per resource monitor, ``load_shed_points`` (scale percent) and
    ``downstream_connections`` (sum). Check that actions engage under load
    with a jsonpath tolerance (``$.stop_accepting_requests``, ``$.active``).
    No overload series at all raises EmptyResult (no overload manager, or
    stats not exported: Istio needs "overload" in its proxy stats matcher).
    """
    selected = _labels(job, selector)
    prom = client(configuration, secrets)
    expr = overload_query(selected)
    samples = parse_instant(prom.instant(expr), expr)
    if not samples:
        raise EmptyResult(
            f"{shown(expr)} found no envoy_overload_* series: is the overload manager "
            "configured, and are overload stats exported (Istio: add 'overload' to "
            "proxyStatsMatcher inclusionPrefixes)?"
        )
    count = connections_query(selected)
    connections = parse_instant(prom.instant(count), count)
    values = {s.labels.get("__name__", ""): s.value for s in samples}
    return overload_summary(values, connections[0].value if connections else None, selected)
