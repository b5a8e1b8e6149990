"""``--fix istio``: the manifests that make the failing rules pass on an Istio gateway. Pure.

* ``custom-bootstrap-configmap.yaml``: a ConfigMap whose ``custom_bootstrap.json``
  pilot-agent hands Envoy as ``--config-yaml`` (overload manager, a runtime
  layer with the per-listener connection limits);
* ``gateway-deployment-patch.yaml``: a strategic merge patch of the gateway's
  Deployment: ``proxy.istio.io/config`` with ``runtimeValues`` merged into the
  gateway's own value (the global connection limit, which pilot-agent writes
  both as the runtime key and, on Istio >= 1.28, into its
  ``global_downstream_max_connections`` resource monitor: an overlay cannot
  change that monitor), and, for a new custom bootstrap, the
  ``ISTIO_BOOTSTRAP_OVERRIDE`` env var, volume and mount spelled out, as Istio's
  ISTIO-SECURITY-2020-007 bulletin does (checked on Istio's own
  ``istio-ingressgateway``, which is not injected). Neither Istio's gateway
  injection template nor its kube-gateway template (Gateway API) handles
  ``sidecar.istio.io/bootstrapOverride``, so no patch relies on it;
* ``envoyfilter.yaml``: ``MERGE`` patches (context ``GATEWAY``) for listener,
  HTTP connection manager (per port, per SNI filter chain where chains differ)
  and cluster fields, selecting the gateway by its own pod labels.

What the gateway already has (:class:`._gateway.GatewayFacts`) is merged, not
replaced, and conflicts are listed (:mod:`._fix_istio_merge`); what cannot be
done safely is left out and said (``FixFiles.caveats``).

The result is applied as Istio would (:mod:`._apply`) and re-audited before
anything is written.
"""

from __future__ import annotations

import json
from typing import Any

from chaos_ext.envoy._apply import (
    with_edits,
    with_envoyfilter,
    with_overlay,
    with_runtime_values,
)
from chaos_ext.envoy._fix import FixPlan, HcmFix, listener_port
from chaos_ext.envoy._fix_envoy import FixFiles, overlay_for, render_yaml, timeout_warnings
from chaos_ext.envoy._fix_heap import size_heap
from chaos_ext.envoy._fix_istio_merge import (
    GATEWAY_API_LABEL,
    envoyfilter_conflicts,
    in_existing,
    merged_bootstrap,
    merged_proxy_config,
    workload_selector,
)
from chaos_ext.envoy._gateway import GatewayFacts
from chaos_ext.envoy._hcm import HCM_TYPE
from chaos_ext.envoy._merge import get_path, path_tokens, split_duplicates
from chaos_ext.envoy._pipeline import AuditRun

__all__ = ["BOOTSTRAP_PATH", "istio_fix"]

BOOTSTRAP_PATH = "/etc/istio/custom-bootstrap/custom_bootstrap.json"
_GLOBAL_CAP = "overload.global_downstream_max_connections"


def _names(run: AuditRun) -> tuple[str, str]:
    metadata = (run.config.bootstrap.value.get("node") or {}).get("metadata") or {}
    namespace = run.role.namespace or str(metadata.get("NAMESPACE") or "istio-system")
    workload = run.role.workload or str(metadata.get("WORKLOAD_NAME") or "istio-ingressgateway")
    return namespace, workload


def _chain_and_filter(fix: HcmFix) -> tuple[dict[str, Any], dict[str, Any]]:
    base = fix.listener.section.path
    tokens = path_tokens(fix.hcm.path[len(base) + 1 :])
    chain_end = next(i for i, t in enumerate(tokens) if t == "filters")
    chain = get_path(fix.listener.section.value, tokens[:chain_end])
    net_filter = get_path(fix.listener.section.value, tokens[: chain_end + 2])
    return chain, net_filter


def _hcm_patches(plan: FixPlan) -> list[dict[str, Any]]:
    by_port: dict[int | None, list[HcmFix]] = {}
    for fix in plan.hcms.values():
        by_port.setdefault(listener_port(fix.listener), []).append(fix)
    patches = []
    for port, fixes in by_port.items():
        same = all(f.fields == fixes[0].fields for f in fixes)
        whole = same and len(fixes) == len(fixes[0].listener.hcms)
        for fix in fixes[:1] if whole else fixes:
            chain, net_filter = _chain_and_filter(fix)
            chain_match: dict[str, Any] = {"filter": {"name": net_filter.get("name")}}
            names = (chain.get("filter_chain_match") or {}).get("server_names") or []
            if not whole and names:
                chain_match["sni"] = names[0]
            listener = (
                {"portNumber": port, "filterChain": chain_match}
                if port
                else {"filterChain": chain_match}
            )
            value = {
                "name": net_filter.get("name"),
                "typed_config": {"@type": HCM_TYPE, **fix.fields},
            }
            patches.append(
                {
                    "applyTo": "NETWORK_FILTER",
                    "match": {"context": "GATEWAY", "listener": listener},
                    "patch": {"operation": "MERGE", "value": value},
                }
            )
    return patches


def envoyfilter_for(
    run: AuditRun, plan: FixPlan, selector: dict[str, str]
) -> dict[str, Any] | None:
    """The EnvoyFilter for the listener, HCM and cluster fields, or None if none fail."""
    namespace, workload = _names(run)
    patches: list[dict[str, Any]] = []
    for listener, fields in plan.listeners.values():
        port = listener_port(listener)
        match: dict[str, Any] = {"context": "GATEWAY"}
        if port:
            match["listener"] = {"portNumber": port}
        patches.append(
            {
                "applyTo": "LISTENER",
                "match": match,
                "patch": {"operation": "MERGE", "value": fields},
            }
        )
    patches += _hcm_patches(plan)
    targets = [None] if plan.all_clusters_fail else [c.value.get("name") for c in plan.clusters]
    for name in targets if plan.clusters else []:
        match = {"context": "GATEWAY", **({"cluster": {"name": name}} if name else {})}
        patches.append(
            {
                "applyTo": "CLUSTER",
                "match": match,
                "patch": {"operation": "MERGE", "value": plan.cluster_fields},
            }
        )
    if not patches:
        return None
    spec = {"workloadSelector": {"labels": selector}, "configPatches": patches}
    return {
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "EnvoyFilter",
        "metadata": {"name": f"{workload}-edge-hardening", "namespace": namespace},
        "spec": spec,
    }


def _deployment_patch(cm_name: str | None, proxy_config_value: str | None) -> dict[str, Any]:
    """A strategic merge patch: the proxy.istio.io/config annotation and the custom bootstrap
    spelled out (env var, volume, mount), as Istio's ISTIO-SECURITY-2020-007 bulletin does."""
    patch: dict[str, Any] = {"spec": {"template": {}}}
    if proxy_config_value is not None:
        patch["spec"]["template"]["metadata"] = {
            "annotations": {"proxy.istio.io/config": proxy_config_value}
        }
    if cm_name:
        patch["spec"]["template"]["spec"] = {
            "containers": [
                {
                    "name": "istio-proxy",
                    "env": [{"name": "ISTIO_BOOTSTRAP_OVERRIDE", "value": BOOTSTRAP_PATH}],
                    "volumeMounts": [
                        {
                            "name": "custom-bootstrap-volume",
                            "mountPath": "/etc/istio/custom-bootstrap",
                            "readOnly": True,
                        }
                    ],
                }
            ],
            "volumes": [
                {
                    "name": "custom-bootstrap-volume",
                    "configMap": {"name": cm_name, "defaultMode": 420, "optional": False},
                }
            ],
        }
    return patch


def _bootstrap_file(
    run: AuditRun,
    facts: GatewayFacts,
    overlay: dict[str, Any],
    edits: dict[str, Any],
    out: FixFiles,
) -> tuple[bool, str | None]:
    """Write the custom bootstrap ConfigMap (merged with the gateway's own); (delivered, the
    ConfigMap the Deployment must newly mount, if any)."""
    namespace, workload = _names(run)
    labels = dict(run.role.labels or {}) | dict(facts.labels or {})
    if GATEWAY_API_LABEL in labels:
        out.caveats.append(
            f"custom bootstrap not written: the gateway has the Gateway API label "
            f"{GATEWAY_API_LABEL}={labels[GATEWAY_API_LABEL]}, so istiod renders its Deployment "
            "from Istio's kube-gateway template, which has no sidecar.istio.io/bootstrapOverride "
            "or ISTIO_BOOTSTRAP_OVERRIDE handling: the overload manager cannot reach it this way"
        )
        return False, None
    existing_name = facts.bootstrap_override
    if existing_name and existing_name not in facts.bootstrap_configmaps:
        out.caveats.append(
            f"custom bootstrap not written: the gateway already takes one from ConfigMap "
            f"{existing_name}, which was not read; give it with --existing (kubectl -n "
            f"{namespace} get configmap {existing_name} -o yaml) so that it is merged, not "
            "replaced"
        )
        return False, None
    name = existing_name or f"{workload}-edge-bootstrap"
    existing = facts.bootstrap_configmaps.get(name, {})
    content, conflicts, edited = merged_bootstrap(existing, overlay, edits, name)
    out.caveats += [f"conflict: {c}" for c in conflicts]
    out.lines += [f"edited in place: {c}" for c in edited]
    # the ConfigMap's other keys are kept: kubectl apply could otherwise prune them
    data = {
        **facts.configmap_data.get(name, {}),
        "custom_bootstrap.json": json.dumps(content, indent=2) + "\n",
    }
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }
    what = (
        "the gateway's own custom bootstrap (ConfigMap {name}) with the fix merged in"
        if existing_name
        else "an Envoy bootstrap overlay for the gateway"
    ).format(name=name)
    out.files["custom-bootstrap-configmap.yaml"] = render_yaml(
        configmap, f"{what.capitalize()} (pilot-agent passes it to Envoy as --config-yaml)."
    )
    out.apply.append("kubectl apply -f custom-bootstrap-configmap.yaml")
    return True, None if existing_name else name


def _proxy_config_value(
    facts: GatewayFacts, values: dict[str, str], out: FixFiles, labels: dict[str, str]
) -> str | None:
    if not values:
        return None
    merged, conflicts = merged_proxy_config(facts, values)
    out.caveats += [f"conflict: {c}" for c in conflicts]
    if GATEWAY_API_LABEL in labels:
        out.caveats.append(
            "proxy.istio.io/config not written: istiod owns a Gateway API gateway's Deployment; "
            "Istio's kube-gateway template copies the Gateway's spec.infrastructure.annotations "
            f"into the pod template: set proxy.istio.io/config there to {merged}"
        )
        return None
    return merged


def _deployment_file(
    run: AuditRun, facts: GatewayFacts, cm_name: str | None, values: dict[str, str], out: FixFiles
) -> None:
    namespace, workload = _names(run)
    labels = dict(run.role.labels or {}) | dict(facts.labels or {})
    annotation = _proxy_config_value(facts, values, out, labels)
    if annotation is None and cm_name is None:
        return
    if not facts.deployment:
        out.caveats.append(
            "the gateway's Deployment was not read (--existing deployment.yaml or --deployment "
            "NAMESPACE/NAME): a strategic merge patch replaces an existing proxy.istio.io/config "
            "annotation's whole value and an existing ISTIO_BOOTSTRAP_OVERRIDE; check the "
            "Deployment has neither before applying gateway-deployment-patch.yaml"
        )
    if facts.injected:
        out.caveats.append(
            "the gateway's pods are injected by Istio; gateway-deployment-patch.yaml is checked "
            'on a Deployment that is not (sidecar.istio.io/inject: "false")'
        )
    usage = (
        f"kubectl -n {namespace} patch deployment {workload} --type strategic "
        "--patch-file gateway-deployment-patch.yaml"
    )
    out.files["gateway-deployment-patch.yaml"] = render_yaml(
        _deployment_patch(cm_name, annotation),
        "Istio gateway Deployment (checked with kubectl patch --local on Istio's "
        'istio-ingressgateway,\nsidecar.istio.io/inject: "false"): ' + usage,
    )
    out.apply += [usage, f"kubectl -n {namespace} rollout status deployment {workload}"]


def _envoyfilter_file(
    run: AuditRun, plan: FixPlan, facts: GatewayFacts, out: FixFiles
) -> dict[str, Any] | None:
    if envoyfilter_for(run, plan, {}) is None:
        return None
    selector, why = workload_selector(run, facts)
    if selector is None:
        out.caveats.append(f"envoyfilter.yaml not written: no workload selector: {why}")
        return None
    envoyfilter = envoyfilter_for(run, plan, selector)
    if envoyfilter is None:
        return None
    labels = dict(run.role.labels or {}) | dict(facts.labels or {})
    out.caveats += [
        f"conflict: {c}" for c in envoyfilter_conflicts(envoyfilter, facts.envoyfilters, labels)
    ]
    out.lines.append(f"workloadSelector {why}")
    out.selector = selector
    out.files["envoyfilter.yaml"] = render_yaml(envoyfilter, "kubectl apply -f envoyfilter.yaml")
    out.apply.insert(0, "kubectl apply -f envoyfilter.yaml")
    return envoyfilter


def istio_fix(run: AuditRun, plan: FixPlan, facts: GatewayFacts) -> FixFiles:
    """The Istio manifests for ``plan``, merged with what the gateway has, applied as Istio
    would and re-audited."""
    out = FixFiles()
    out.lines += size_heap(plan, run.config.bootstrap.value, facts)
    values = {k: str(v) for k, v in plan.runtime.items() if k == _GLOBAL_CAP}
    layer = {k: v for k, v in plan.runtime.items() if k != _GLOBAL_CAP}
    overlay, dropped = overlay_for(run, plan, runtime=layer)
    own: dict[str, Any] = dict(facts.bootstrap_configmaps.get(facts.bootstrap_override) or {})
    edits: dict[str, Any] = in_existing(own, plan.bootstrap) or {}
    if edits:  # elements of the gateway's own custom bootstrap: edited in its ConfigMap
        dropped = [p for p in dropped if p not in split_duplicates(own, plan.bootstrap)[1]]
    delivered, cm_name = (
        _bootstrap_file(run, facts, overlay, edits, out) if overlay or edits else (False, None)
    )
    _deployment_file(run, facts, cm_name, values, out)
    envoyfilter = _envoyfilter_file(run, plan, facts, out)
    out.apply.sort(key=lambda line: not line.startswith("kubectl apply"))
    # pilot-agent writes the bootstrap (runtimeValues included); Envoy then merges the overlay
    written = values if "gateway-deployment-patch.yaml" in out.files else {}
    applied = with_runtime_values(run.decoded, written)
    if delivered:
        applied = with_overlay(with_edits(applied, edits), overlay)
    if envoyfilter:  # istiod applies it only to the pods its selector selects
        labels = dict(run.role.labels or {}) | dict(facts.labels or {})
        applied = with_envoyfilter(applied, envoyfilter, labels)
    recheck = run.again(applied)
    out.rechecks["istio"] = recheck.report
    state = (
        "the audit passes"
        if recheck.report["passed"]
        else "still failing: " + ", ".join(recheck.report["summary"]["failed_rules"])
    )
    out.lines.append(f"manifests applied as Istio applies them: {state}")
    out.caveats += [
        f"not in the custom bootstrap (Envoy would refuse a second {p}): edit it in place"
        for p in dropped
    ]
    out.caveats += [
        f"manual: listener {label}: name it {name!r} (a bootstrap listener: an "
        "EnvoyFilter cannot rename it)"
        for label, (_, name) in plan.names.items()
    ]
    out.caveats += [f"manual: {rule}: {why}" for rule, why in plan.manual]
    out.warnings += timeout_warnings(plan)
    return out
