"""What ``--fix istio`` merges with: the gateway's own settings, labels and EnvoyFilters. Pure.

* :func:`workload_selector`: the EnvoyFilter's selector from the gateway's own
  pod labels (the dump's node metadata ``LABELS``, the Deployment's pod
  template), checked against every place the labels were read; None and the
  reason when no selector can be trusted;
* :func:`merged_proxy_config`: the ``proxy.istio.io/config`` annotation with the
  fix's ``runtimeValues`` merged in key by key (a strategic merge patch would
  replace the annotation's whole value);
* :func:`merged_bootstrap`: the custom bootstrap ConfigMap's content, the
  gateway's own merged with the fix's overlay;
* :func:`envoyfilter_conflicts`: fields that an existing EnvoyFilter already
  sets on the same target to another value.

Each merge returns the conflicts in words: ``where: 'old' is replaced by 'new'``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from chaos_ext.envoy._gateway import GatewayFacts, proxy_config
from chaos_ext.envoy._merge import upsert
from chaos_ext.envoy._pipeline import AuditRun

__all__ = [
    "GATEWAY_API_LABEL",
    "OVERRIDE_ANNOTATION",
    "envoyfilter_conflicts",
    "in_existing",
    "merged_bootstrap",
    "merged_proxy_config",
    "workload_selector",
]

GATEWAY_API_LABEL = "gateway.networking.k8s.io/gateway-name"
OVERRIDE_ANNOTATION = "sidecar.istio.io/bootstrapOverride"
# the label Istio's gateway installs select on, the one its kube-gateway template sets, app
_SELECTOR_KEYS = ("istio", GATEWAY_API_LABEL, "app")


def _label_sources(run: AuditRun, facts: GatewayFacts) -> list[tuple[str, dict[str, str]]]:
    sources = []
    if run.role.labels:
        where = f"{run.config.bootstrap.path}.node.metadata.LABELS"
        sources.append((where, {str(k): str(v) for k, v in run.role.labels.items()}))
    if facts.labels:
        sources.append((facts.labels_from, dict(facts.labels)))
    return sources


def workload_selector(run: AuditRun, facts: GatewayFacts) -> tuple[dict[str, str] | None, str]:
    """(selector, where it comes from), or (None, why there is none)."""
    sources = _label_sources(run, facts)
    if not sources:
        return None, (
            "the gateway's pod labels are not known (the dump's node metadata has no "
            "LABELS and no Deployment was read): give --existing deployment.yaml or "
            "--deployment NAMESPACE/NAME"
        )
    where, labels = sources[0]
    key = next((k for k in _SELECTOR_KEYS if k in labels), None)
    if key is None:
        return None, (
            f"none of the labels {', '.join(_SELECTOR_KEYS)} in {where} "
            f"({json.dumps(labels, sort_keys=True)}): write the selector by hand"
        )
    selector = {key: labels[key]}
    for other, other_labels in sources:
        if other_labels.get(key) != labels[key]:
            return None, (
                f"the selector {json.dumps(selector)} from {where} does not match "
                f"{other} ({json.dumps(other_labels, sort_keys=True)})"
            )
    return selector, f"{json.dumps(selector)} matches {', '.join(w for w, _ in sources)}"


def _conflicts(base: Any, patch: Any, path: str) -> Iterator[str]:
    if isinstance(base, dict) and isinstance(patch, dict):
        for key, value in patch.items():
            if key in base:
                yield from _conflicts(base[key], value, f"{path}.{key}")
        return
    if isinstance(base, list) and isinstance(patch, list):
        for item in patch:
            name = item.get("name") if isinstance(item, dict) else None
            same = [
                old for old in base if isinstance(old, dict) and name and old.get("name") == name
            ]
            for old in same[:1]:
                yield from _conflicts(old, item, f"{path}[?name = {name!r}]")
        return
    if base != patch and str(base) != str(patch):
        yield f"{path}: {json.dumps(base)} is replaced by {json.dumps(patch)}"


def merged_proxy_config(facts: GatewayFacts, values: Mapping[str, str]) -> tuple[str, list[str]]:
    """The ``proxy.istio.io/config`` value with ``runtimeValues`` merged in, and the conflicts."""
    existing = proxy_config(facts.annotations, facts.annotations_from or "the gateway")
    ours = {"runtimeValues": dict(values)}
    conflicts = list(_conflicts(existing, ours, "proxy.istio.io/config"))
    return json.dumps(upsert(existing, ours)), conflicts


def merged_bootstrap(
    existing: Mapping[str, Any], overlay: Mapping[str, Any], edits: Mapping[str, Any], name: str
) -> tuple[dict[str, Any], list[str], list[str]]:
    """The gateway's custom bootstrap with the overlay merged in and ``edits`` (see
    :func:`in_existing`) written in place; the conflicts, and the values edited."""
    conflicts = list(_conflicts(dict(existing), dict(overlay), f"ConfigMap {name}"))
    edited = list(_conflicts(dict(existing), dict(edits), f"ConfigMap {name}"))
    return upsert(upsert(dict(existing), dict(overlay)), dict(edits)), conflicts, edited


def in_existing(existing: Any, patch: Any) -> Any:
    """The part of ``patch`` that changes named elements ``existing`` already has (e.g. the
    gateway's own fixed_heap monitor): an overlay cannot, an edit of its ConfigMap can."""
    if isinstance(existing, dict) and isinstance(patch, dict):
        found = {}
        for key, value in patch.items():
            part = in_existing(existing[key], value) if key in existing else None
            if part:
                found[key] = part
        return found
    if isinstance(existing, list) and isinstance(patch, list):
        names = {item.get("name") for item in existing if isinstance(item, dict)}
        return [item for item in patch if isinstance(item, dict) and item.get("name") in names]
    return None


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key != "@type":
                yield from _leaves(item, f"{path}.{key}" if path else str(key))
    else:
        yield path, value


def _selects(existing: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    wanted = ((existing.get("spec") or {}).get("workloadSelector") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in wanted.items())


def _same_target(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    if a.get("applyTo") != b.get("applyTo"):
        return False
    port_a = ((a.get("match") or {}).get("listener") or {}).get("portNumber")
    port_b = ((b.get("match") or {}).get("listener") or {}).get("portNumber")
    return port_a is None or port_b is None or port_a == port_b


def envoyfilter_conflicts(
    ours: Mapping[str, Any], existing: tuple[Mapping[str, Any], ...], labels: Mapping[str, str]
) -> list[str]:
    """Fields our EnvoyFilter sets that an existing one (selecting the gateway) sets otherwise."""
    found: list[str] = []
    name = (ours.get("metadata") or {}).get("name")
    for other in existing:
        other_name = (other.get("metadata") or {}).get("name")
        if other_name == name:
            found.append(f"EnvoyFilter {other_name} exists: applying ours replaces it")
            continue
        if not _selects(other, labels):
            continue
        for theirs in (other.get("spec") or {}).get("configPatches") or []:
            for mine in ours["spec"]["configPatches"]:
                if not _same_target(theirs, mine):
                    continue
                their_leaves = dict(_leaves((theirs.get("patch") or {}).get("value") or {}))
                for path, value in _leaves(mine["patch"]["value"]):
                    if path in their_leaves and str(their_leaves[path]) != str(value):
                        found.append(
                            f"EnvoyFilter {other_name} ({mine['applyTo']}) sets {path} "
                            f"to {json.dumps(their_leaves[path])}, ours to "
                            f"{json.dumps(value)}: which wins depends on the "
                            "filters' priority and age"
                        )
    return found
