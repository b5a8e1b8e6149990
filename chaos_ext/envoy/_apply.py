"""Apply fixes to an audited configuration the way Envoy and Istio would. Pure.

Used to check generated fixes before they are written (``gameday audit envoy
--fix`` re-audits the result and says what still fails) and by the tests:

* :func:`with_overlay`: Envoy ``--config-yaml`` / Istio custom bootstrap, i.e.
  protobuf ``MergeFrom`` of the overlay into the bootstrap (:mod:`._merge`);
* :func:`with_runtime_values`: what pilot-agent writes for ProxyConfig
  ``runtimeValues`` (istio/istio pkg/bootstrap/config.go): each key into the
  first static layer ("global config"), and ``overload.global_downstream_max_connections``
  also into the ``global_downstream_max_connections`` resource monitor when the
  bootstrap has one (Istio >= 1.28; see its ``global_downstream_max_connections_runtime``
  golden);
* :func:`with_envoyfilter`: an EnvoyFilter's ``MERGE`` patches on a gateway's
  listeners, HTTP connection managers and clusters, as istiod applies them
  (typed configs of one type merge field by field).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from chaos_ext.envoy._hcm import hcm_section
from chaos_ext.envoy._input import Decoded
from chaos_ext.envoy._merge import proto_merge, upsert

__all__ = ["with_edits", "with_envoyfilter", "with_overlay", "with_runtime_values"]

_GLOBAL_CAP = "overload.global_downstream_max_connections"
_CAP_MONITOR = "envoy.resource_monitors.global_downstream_max_connections"


def _with_bootstrap(
    decoded: Decoded, change: Callable[[dict[str, Any]], dict[str, Any]]
) -> Decoded:
    data = copy.deepcopy(decoded.data)
    if decoded.kind == "bootstrap":
        return Decoded(decoded.kind, change(data), decoded.syntax, decoded.notes)
    for entry in data["configs"]:
        if str(entry.get("@type", "")).endswith(".BootstrapConfigDump"):
            entry["bootstrap"] = change(entry["bootstrap"])
            break
    return Decoded(decoded.kind, data, decoded.syntax, decoded.notes)


def with_overlay(decoded: Decoded, overlay: Mapping[str, Any]) -> Decoded:
    """``decoded`` with a bootstrap overlay merged in as Envoy's ``--config-yaml`` does."""
    return _with_bootstrap(decoded, lambda boot: proto_merge(boot, overlay))


def with_edits(decoded: Decoded, edits: Mapping[str, Any]) -> Decoded:
    """``decoded`` with named bootstrap elements edited in place (``_merge.upsert``): what a
    changed custom bootstrap ConfigMap gives after the pod restarts."""
    return _with_bootstrap(decoded, lambda boot: upsert(boot, edits)) if edits else decoded


def _runtime_values(boot: dict[str, Any], values: Mapping[str, str]) -> dict[str, Any]:
    runtime = boot.setdefault("layered_runtime", {})
    layers = runtime.setdefault("layers", [])
    static = next((layer for layer in layers if "static_layer" in layer), None)
    if static is None:
        static = {"name": "global config", "static_layer": {}}
        layers.insert(0, static)
    static["static_layer"].update(values)
    cap = values.get(_GLOBAL_CAP)
    for monitor in (boot.get("overload_manager") or {}).get("resource_monitors") or []:
        if cap is not None and monitor.get("name") == _CAP_MONITOR:
            monitor.setdefault("typed_config", {})["max_active_downstream_connections"] = int(cap)
    return boot


def with_runtime_values(decoded: Decoded, values: Mapping[str, str]) -> Decoded:
    """``decoded`` as pilot-agent generates it with ProxyConfig ``runtimeValues``."""
    return _with_bootstrap(decoded, lambda boot: _runtime_values(boot, values))


def _listeners(data: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for entry in data.get("configs") or []:
        if not str(entry.get("@type", "")).endswith(".ListenersConfigDump"):
            continue
        for item in entry.get("dynamic_listeners") or []:
            for state in ("active_state", "warming_state"):
                if isinstance((item.get(state) or {}).get("listener"), dict):
                    yield item[state]["listener"]
        for item in entry.get("dynamic_active_listeners") or []:
            if isinstance(item.get("listener"), dict):
                yield item["listener"]


def _clusters(data: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for entry in data.get("configs") or []:
        if str(entry.get("@type", "")).endswith(".ClustersConfigDump"):
            for item in entry.get("dynamic_active_clusters") or []:
                if isinstance(item.get("cluster"), dict):
                    yield item["cluster"]


def _port_matches(listener: Mapping[str, Any], match: Mapping[str, Any]) -> bool:
    port = ((listener.get("address") or {}).get("socket_address") or {}).get("port_value")
    wanted = (match.get("listener") or {}).get("portNumber")
    return wanted is None or wanted == port


def _merge_filter(net_filter: dict[str, Any], value: Mapping[str, Any]) -> None:
    if isinstance(net_filter.get("config"), dict) and isinstance(value.get("typed_config"), dict):
        fields = {k: v for k, v in value["typed_config"].items() if k != "@type"}  # older form
        net_filter["config"] = proto_merge(net_filter["config"], fields)
        return
    typed, patch = net_filter.get("typed_config"), dict(value)
    if isinstance(typed, dict) and isinstance(patch.get("typed_config"), dict):
        # v2 and v3 HttpConnectionManager are one message to Envoy: merge, keep the dump's @type
        patch["typed_config"] = {**patch["typed_config"], "@type": typed.get("@type")}
    net_filter.update(proto_merge(net_filter, patch, deep_any=True))


def _network_filter(
    listener: dict[str, Any], match: Mapping[str, Any], value: Mapping[str, Any]
) -> None:
    chain_match = (match.get("listener") or {}).get("filterChain") or {}
    name = (chain_match.get("filter") or {}).get("name")
    for chain in listener.get("filter_chains") or []:
        sni = chain_match.get("sni")
        if sni and sni not in ((chain.get("filter_chain_match") or {}).get("server_names") or []):
            continue
        for net_filter in chain.get("filters") or []:
            if net_filter.get("name") == name and hcm_section(net_filter, "") is not None:
                _merge_filter(net_filter, value)


def _apply_patch(data: dict[str, Any], patch: Mapping[str, Any]) -> None:
    match, value = patch.get("match") or {}, (patch.get("patch") or {}).get("value") or {}
    if (patch.get("patch") or {}).get("operation") != "MERGE":
        raise ValueError(f"only MERGE patches are simulated, got {patch.get('patch')!r}")
    if patch["applyTo"] == "CLUSTER":
        wanted = (match.get("cluster") or {}).get("name")
        for cluster in _clusters(data):
            if wanted in (None, cluster.get("name")):
                cluster.update(proto_merge(cluster, value))
        return
    for listener in _listeners(data):
        if not _port_matches(listener, match):
            continue
        if patch["applyTo"] == "LISTENER":
            listener.update(proto_merge(listener, value))
        elif patch["applyTo"] == "NETWORK_FILTER":
            _network_filter(listener, match, value)


def with_envoyfilter(
    decoded: Decoded, envoyfilter: Mapping[str, Any], labels: Mapping[str, str] | None = None
) -> Decoded:
    """A gateway's ``/config_dump`` after istiod applied this EnvoyFilter's MERGE patches.

    With the gateway's pod ``labels``, as istiod does, only if its ``workloadSelector``
    selects them (else the dump is unchanged).
    """
    selector = ((envoyfilter.get("spec") or {}).get("workloadSelector") or {}).get("labels") or {}
    if labels is not None and any(labels.get(k) != v for k, v in selector.items()):
        return decoded
    data = copy.deepcopy(decoded.data)
    for patch in envoyfilter["spec"]["configPatches"]:
        _apply_patch(data, patch)
    return Decoded(decoded.kind, data, decoded.syntax, decoded.notes)
