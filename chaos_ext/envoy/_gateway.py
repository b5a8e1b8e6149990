"""What a fix must know about the gateway's Kubernetes objects. Pure.

The fix writers need four things the ``/config_dump`` does not hold, or does
not hold reliably:

* the ``istio-proxy`` container's memory limit, to size the overload manager's
  heap below it (a heap at or above the limit means the kernel OOM-kills Envoy
  before ``shrink_heap`` or ``stop_accepting_requests`` can fire);
* the pod template's annotations (``proxy.istio.io/config``,
  ``sidecar.istio.io/bootstrapOverride``), to merge into them instead of
  replacing them;
* the custom bootstrap ConfigMaps and the EnvoyFilters already there, to merge
  with and to list conflicts against;
* the pods' labels, for the EnvoyFilter's ``workloadSelector``.

They come from the live Deployment (:mod:`._gateway_api`) or from manifests
given with ``--existing`` (:func:`facts_from_documents`), and ``--memory-limit``
(:func:`with_memory_limit`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from chaos_ext.envoy.errors import EnvoyError
from chaos_ext.errors import InvalidArgument

__all__ = [
    "BOOTSTRAP_KEY",
    "HEAP_FRACTION",
    "PROXY_CONTAINER",
    "GatewayFacts",
    "facts_from_deployment",
    "facts_from_documents",
    "heap_for",
    "merged_facts",
    "parse_quantity",
    "proxy_config",
    "with_memory_limit",
]

HEAP_FRACTION = 0.8
"""The heap limit as a share of the container's memory limit.

Envoy's edge page asks for the overload manager but gives no figure against a
container limit; Envoy Gateway sizes ``fixed_heap`` at 80 % of the container's
memory limit "which leaves headroom for memory that is not allocated on the
heap" (gateway.envoyproxy.io, tasks/operations/overload-manager). With the
example's thresholds, ``stop_accepting_requests`` then fires at 78 % of the
limit and ``shrink_heap`` at 76 %.
"""
PROXY_CONTAINER = "istio-proxy"
BOOTSTRAP_KEY = "custom_bootstrap.json"
_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$")
_FACTORS = {
    None: 1,
    "m": 0.001,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


@dataclass(frozen=True)
class GatewayFacts:
    """The gateway's Kubernetes side, as far as it is known (each with where it came from)."""

    memory_limit_bytes: int | None = None
    memory_limit_from: str = ""
    labels: Mapping[str, str] | None = None  # the pod template's labels
    labels_from: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)  # the pod template's
    annotations_from: str = ""
    bootstrap_configmaps: Mapping[str, Any] = field(default_factory=dict)  # name: parsed json
    configmap_data: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # name: data
    envoyfilters: tuple[Mapping[str, Any], ...] = ()
    deployment: str = ""  # NAMESPACE/NAME
    bootstrap_override: str = ""  # the ConfigMap the gateway's custom bootstrap comes from
    injected: bool | None = None  # whether Istio's injector renders the proxy container
    notes: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        """Whether anything was read about the gateway's objects."""
        return bool(self.deployment or self.bootstrap_configmaps or self.envoyfilters)


def parse_quantity(text: str, *, what: str = "memory limit") -> int:
    """Bytes in a Kubernetes quantity (``1024Mi``, ``1Gi``, ``1.5G``, ``1073741824``)."""
    match = _QUANTITY.match(str(text).strip())
    if not match:
        raise InvalidArgument(
            f"{what}: {text!r} is not a Kubernetes quantity; write it as in limits.memory, "
            "e.g. 1024Mi or 1Gi"
        )
    value = int(float(match.group(1)) * _FACTORS[match.group(2)])
    if value <= 0:
        raise InvalidArgument(f"{what}: {text!r} is not a positive amount of memory")
    return value


def heap_for(limit_bytes: int) -> int:
    """The largest heap limit the fix writes for a container limited to ``limit_bytes``."""
    return int(limit_bytes * HEAP_FRACTION)


def with_memory_limit(facts: GatewayFacts, text: str) -> GatewayFacts:
    """``facts`` with ``--memory-limit`` (it overrides what a Deployment said)."""
    if not text:
        return facts
    return replace(
        facts, memory_limit_bytes=parse_quantity(text), memory_limit_from=f"--memory-limit {text}"
    )


def _limit(containers: Iterable[Mapping[str, Any]], where: str) -> tuple[int | None, str, str]:
    for container in containers:
        if container.get("name") != PROXY_CONTAINER:
            continue
        limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        path = f"{where} container {PROXY_CONTAINER} resources.limits.memory"
        if limit is None:
            return None, "", f"{path}: not set (no heap can be sized from it)"
        return parse_quantity(str(limit), what=path), f"{path} = {limit}", ""
    return None, "", f"{where}: no container {PROXY_CONTAINER!r}"


def _override(spec: Mapping[str, Any], annotations: Mapping[str, str]) -> str:
    """The ConfigMap behind ``ISTIO_BOOTSTRAP_OVERRIDE`` (or the injector's annotation)."""
    for container in spec.get("containers") or []:
        if container.get("name") != PROXY_CONTAINER:
            continue
        env = {e.get("name"): e.get("value") for e in container.get("env") or []}
        path = str(env.get("ISTIO_BOOTSTRAP_OVERRIDE") or "")
        mounts = [
            m
            for m in container.get("volumeMounts") or []
            if path and path.startswith(str(m.get("mountPath", "")).rstrip("/") + "/")
        ]
        for volume in spec.get("volumes") or []:
            if mounts and volume.get("name") == mounts[0].get("name"):
                return str((volume.get("configMap") or {}).get("name") or "")
    return str(annotations.get("sidecar.istio.io/bootstrapOverride") or "")


def _injected(labels: Mapping[str, str], annotations: Mapping[str, str]) -> bool:
    inject = labels.get("sidecar.istio.io/inject", annotations.get("sidecar.istio.io/inject"))
    return inject == "true" or "inject.istio.io/templates" in annotations


def facts_from_deployment(doc: Mapping[str, Any], where: str) -> GatewayFacts:
    """What a Deployment says: the proxy's memory limit, pod labels and annotations."""
    meta = doc.get("metadata") or {}
    template = (doc.get("spec") or {}).get("template") or {}
    tmeta, spec = template.get("metadata") or {}, template.get("spec") or {}
    limit, limit_from, note = _limit(spec.get("containers") or [], where)
    labels = {str(k): str(v) for k, v in (tmeta.get("labels") or {}).items()}
    annotations = {str(k): str(v) for k, v in (tmeta.get("annotations") or {}).items()}
    return GatewayFacts(
        memory_limit_bytes=limit,
        memory_limit_from=limit_from,
        labels=labels or None,
        labels_from=f"{where} spec.template.metadata.labels",
        annotations=annotations,
        annotations_from=f"{where} spec.template.metadata.annotations",
        deployment=f"{meta.get('namespace') or 'default'}/{meta.get('name')}",
        bootstrap_override=_override(spec, annotations),
        injected=_injected(labels, annotations),
        notes=(note,) if note else (),
    )


def _bootstrap_of(doc: Mapping[str, Any], where: str) -> Any:
    text = (doc.get("data") or {}).get(BOOTSTRAP_KEY)
    if text is None:
        raise EnvoyError(f"{where}: ConfigMap has no {BOOTSTRAP_KEY!r} key (Istio reads that one)")
    try:
        return yaml.safe_load(text) or {}  # JSON is YAML; pilot-agent accepts both
    except yaml.YAMLError as exc:
        raise EnvoyError(f"{where}: {BOOTSTRAP_KEY} is not JSON or YAML: {exc}") from exc


def _documents(docs: Iterable[Any]) -> Iterable[Mapping[str, Any]]:
    for doc in docs:
        if isinstance(doc, Mapping) and doc.get("kind") == "List":
            yield from (item for item in doc.get("items") or [] if isinstance(item, Mapping))
        elif isinstance(doc, Mapping):
            yield doc


def facts_from_documents(docs: Iterable[Any], *, origin: str) -> GatewayFacts:
    """Gateway facts from manifests (``kubectl get -o yaml`` output, a ``List`` too)."""
    facts, maps, filters = GatewayFacts(), {}, []
    data: dict[str, dict[str, str]] = {}
    for doc in _documents(docs):
        kind, name = doc.get("kind"), (doc.get("metadata") or {}).get("name")
        where = f"{origin}: {kind} {name}"
        if kind == "Deployment":
            if facts.deployment:
                raise EnvoyError(f"{origin}: more than one Deployment; give the gateway's only")
            facts = facts_from_deployment(doc, where)
        elif kind == "ConfigMap" and BOOTSTRAP_KEY in (doc.get("data") or {}):
            maps[str(name)] = _bootstrap_of(doc, where)
            data[str(name)] = {str(k): str(v) for k, v in (doc.get("data") or {}).items()}
        elif kind == "EnvoyFilter":
            filters.append(doc)
    return replace(
        facts, bootstrap_configmaps=maps, configmap_data=data, envoyfilters=tuple(filters)
    )


def merged_facts(first: GatewayFacts, second: GatewayFacts) -> GatewayFacts:
    """Facts from two places (e.g. two ``--existing`` files): the second adds to the first."""
    base = second if second.deployment else first
    return replace(
        base,
        bootstrap_configmaps={**first.bootstrap_configmaps, **second.bootstrap_configmaps},
        configmap_data={**first.configmap_data, **second.configmap_data},
        envoyfilters=first.envoyfilters + second.envoyfilters,
        notes=first.notes + second.notes,
    )


def proxy_config(annotations: Mapping[str, str], where: str) -> dict[str, Any]:
    """The ``proxy.istio.io/config`` annotation as a mapping (Istio reads it as YAML)."""
    text = annotations.get("proxy.istio.io/config")
    if not text:
        return {}
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise EnvoyError(f"{where}: proxy.istio.io/config is not YAML or JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise EnvoyError(f"{where}: proxy.istio.io/config is {json.dumps(value)}, not an object")
    return value
