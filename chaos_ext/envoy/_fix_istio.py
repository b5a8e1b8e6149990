"""``--fix istio``: the manifests that make the failing rules pass on an Istio gateway. Pure.

* ``custom-bootstrap-configmap.yaml``: a ConfigMap whose ``custom_bootstrap.json``
  pilot-agent hands Envoy as ``--config-yaml`` (overload manager, a runtime
  layer with the per-listener connection limits);
* ``gateway-deployment-patch.yaml``: pod-template annotations for an injected
  gateway (Istio's ``gateway`` chart, Gateway API): ``sidecar.istio.io/bootstrapOverride``
  makes the injector mount that ConfigMap and set ``ISTIO_BOOTSTRAP_OVERRIDE``
  (gateway-injection-template.yaml); ``proxy.istio.io/config`` ``runtimeValues``
  sets the global connection limit, which pilot-agent writes both as the
  runtime key and, on Istio >= 1.28, into its ``global_downstream_max_connections``
  resource monitor (an overlay cannot change that monitor: Envoy would refuse a
  second one);
* ``gateway-deployment-patch-noninjected.yaml``: the same for a gateway deployed
  with ``sidecar.istio.io/inject: "false"`` (istioctl/operator installs): the
  env var, volume and mount spelled out, as Istio's ISTIO-SECURITY-2020-007
  bulletin does;
* ``envoyfilter.yaml``: ``MERGE`` patches (context ``GATEWAY``) for listener,
  HTTP connection manager (per port, per SNI filter chain where chains differ)
  and cluster fields.

The result is applied as Istio would (:mod:`._apply`) and re-audited before
anything is written.
"""

from __future__ import annotations

import json
from typing import Any

from chaos_ext.envoy._apply import with_envoyfilter, with_overlay, with_runtime_values
from chaos_ext.envoy._fix import FixPlan, HcmFix, listener_port
from chaos_ext.envoy._fix_envoy import FixFiles, overlay_for, render_yaml
from chaos_ext.envoy._hcm import HCM_TYPE
from chaos_ext.envoy._merge import get_path, path_tokens, upsert
from chaos_ext.envoy._pipeline import AuditRun

__all__ = ["BOOTSTRAP_PATH", "istio_fix"]

BOOTSTRAP_PATH = "/etc/istio/custom-bootstrap/custom_bootstrap.json"
_GLOBAL_CAP = "overload.global_downstream_max_connections"


def _names(run: AuditRun) -> tuple[str, str, dict[str, str]]:
    metadata = (run.config.bootstrap.value.get("node") or {}).get("metadata") or {}
    namespace = run.role.namespace or str(metadata.get("NAMESPACE") or "istio-system")
    workload = run.role.workload or str(metadata.get("WORKLOAD_NAME") or "istio-ingressgateway")
    labels = dict(run.role.labels or {})
    selector = {"istio": labels["istio"]} if "istio" in labels else {"istio": "ingressgateway"}
    return namespace, workload, selector


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
            value = {"name": net_filter.get("name"),
                     "typed_config": {"@type": HCM_TYPE, **fix.fields}}  # fmt: skip
            patches.append({"applyTo": "NETWORK_FILTER",
                            "match": {"context": "GATEWAY", "listener": listener},
                            "patch": {"operation": "MERGE", "value": value}})  # fmt: skip
    return patches


def envoyfilter_for(run: AuditRun, plan: FixPlan) -> dict[str, Any] | None:
    """The EnvoyFilter for the listener, HCM and cluster fields, or None if none fail."""
    namespace, workload, selector = _names(run)
    patches: list[dict[str, Any]] = []
    for listener, fields in plan.listeners.values():
        port = listener_port(listener)
        match: dict[str, Any] = {"context": "GATEWAY"}
        if port:
            match["listener"] = {"portNumber": port}
        patches.append({"applyTo": "LISTENER", "match": match,
                        "patch": {"operation": "MERGE", "value": fields}})  # fmt: skip
    patches += _hcm_patches(plan)
    targets = [None] if plan.all_clusters_fail else [c.value.get("name") for c in plan.clusters]
    for name in targets if plan.clusters else []:
        match = {"context": "GATEWAY", **({"cluster": {"name": name}} if name else {})}
        patches.append({"applyTo": "CLUSTER", "match": match,
                        "patch": {"operation": "MERGE", "value": plan.cluster_fields}})  # fmt: skip
    if not patches:
        return None
    spec = {"workloadSelector": {"labels": selector}, "configPatches": patches}
    return {"apiVersion": "networking.istio.io/v1alpha3", "kind": "EnvoyFilter",
            "metadata": {"name": f"{workload}-edge-hardening", "namespace": namespace},
            "spec": spec}  # fmt: skip


def _deployment_patches(cm_name: str, overlay: dict[str, Any], values: dict[str, str]
                        ) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
    annotations: dict[str, str] = {}
    if overlay:
        annotations["sidecar.istio.io/bootstrapOverride"] = cm_name
    if values:
        annotations["proxy.istio.io/config"] = json.dumps({"runtimeValues": values})
    injected: dict[str, Any] = {"spec": {"template": {"metadata": {"annotations": annotations}}}}
    plain = {"spec": {"template": {"metadata": {"annotations": {
        k: v for k, v in annotations.items() if k == "proxy.istio.io/config"}}}}}  # fmt: skip
    if overlay:
        plain = upsert(plain, {"spec": {"template": {"spec": {
            "containers": [{"name": "istio-proxy",
                            "env": [{"name": "ISTIO_BOOTSTRAP_OVERRIDE", "value": BOOTSTRAP_PATH}],
                            "volumeMounts": [{"name": "custom-bootstrap-volume",
                                              "mountPath": "/etc/istio/custom-bootstrap",
                                              "readOnly": True}]}],
            "volumes": [{"name": "custom-bootstrap-volume",
                         "configMap": {"name": cm_name, "defaultMode": 420, "optional": False}}],
        }}}})  # fmt: skip
    return injected, plain


def istio_fix(run: AuditRun, plan: FixPlan) -> FixFiles:
    """The Istio manifests for ``plan``, applied as Istio would and re-audited."""
    out = FixFiles()
    namespace, workload, _ = _names(run)
    cm_name = f"{workload}-edge-bootstrap"
    values = {k: str(v) for k, v in plan.runtime.items() if k == _GLOBAL_CAP}
    layer = {k: v for k, v in plan.runtime.items() if k != _GLOBAL_CAP}
    overlay, dropped = overlay_for(run, plan, runtime=layer)
    envoyfilter = envoyfilter_for(run, plan)
    if overlay:
        data = {"custom_bootstrap.json": json.dumps(overlay, indent=2) + "\n"}
        configmap = {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": cm_name, "namespace": namespace},
                     "data": data}  # fmt: skip
        out.files["custom-bootstrap-configmap.yaml"] = render_yaml(
            configmap, "Envoy bootstrap overlay for the gateway (pilot-agent passes it as "
                       "--config-yaml).")  # fmt: skip
    injected, plain = _deployment_patches(cm_name, overlay, values)
    if overlay or values:
        usage = (f"kubectl -n {namespace} patch deployment {workload} --type strategic "
                 "--patch-file {}")  # fmt: skip
        out.files["gateway-deployment-patch.yaml"] = render_yaml(
            injected, "Injected gateway (Istio gateway chart, Gateway API): " + usage.format(
                "gateway-deployment-patch.yaml"))  # fmt: skip
        out.files["gateway-deployment-patch-noninjected.yaml"] = render_yaml(
            plain, 'Gateway with sidecar.istio.io/inject: "false": ' + usage.format(
                "gateway-deployment-patch-noninjected.yaml"))  # fmt: skip
    if envoyfilter:
        out.files["envoyfilter.yaml"] = render_yaml(
            envoyfilter, "kubectl apply -f envoyfilter.yaml"
        )
    # pilot-agent writes the bootstrap (runtimeValues included); Envoy then merges the overlay
    applied = with_overlay(with_runtime_values(run.decoded, values), overlay)
    if envoyfilter:
        applied = with_envoyfilter(applied, envoyfilter)
    recheck = run.again(applied)
    out.rechecks["istio"] = recheck.report
    state = ("the audit passes" if recheck.report["passed"] else
             "still failing: " + ", ".join(recheck.report["summary"]["failed_rules"]))  # fmt: skip
    out.lines.append(f"manifests applied as Istio applies them: {state}")
    out.lines += [f"not in the custom bootstrap (Envoy would refuse a second {p}): edit it "
                  "in place" for p in dropped]  # fmt: skip
    out.lines += [
        f"manual: listener {label}: name it {name!r} (a bootstrap listener: an "
        "EnvoyFilter cannot rename it)"
        for label, (_, name) in plan.names.items()
    ]
    out.lines += [f"manual: {rule}: {why}" for rule, why in plan.manual]
    return out
