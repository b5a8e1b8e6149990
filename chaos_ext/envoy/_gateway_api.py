"""Read the gateway's Deployment, custom bootstrap and EnvoyFilters from the Kubernetes API.

Read-only (get/list), each request with the client's default timeout
(:func:`chaos_ext._core.k8s.call`); what is read is turned into
:class:`._gateway.GatewayFacts` by the same pure code that reads ``--existing``
files, so the two give the same fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from chaos_ext.envoy._gateway import (
    GatewayFacts,
    facts_from_deployment,
    facts_from_documents,
    merged_facts,
    with_memory_limit,
)
from chaos_ext.envoy.errors import EnvoyError
from chaos_ext.errors import InvalidArgument

__all__ = ["load_facts", "parse_deployment", "read_gateway"]

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def parse_deployment(text: str) -> tuple[str, str]:
    """``NAMESPACE/NAME`` -> (namespace, name); InvalidArgument quoting it otherwise."""
    namespace, _, name = str(text).partition("/")
    if not (_NAME.match(namespace) and _NAME.match(name)):
        raise InvalidArgument(
            f"deployment: {text!r} is not NAMESPACE/NAME (e.g. istio-system/istio-ingressgateway)"
        )
    return namespace, name


def read_gateway(deployment: str, *, secrets: Mapping[str, Any] | None = None) -> GatewayFacts:
    """The gateway's facts from the live Deployment (and what its annotations name)."""
    from kubernetes import client  # noqa: PLC0415 - ~0.5 s of imports, only for this source
    from kubernetes.config.config_exception import ConfigException  # noqa: PLC0415

    from chaos_ext._core.k8s import api_client, read_json, status_of  # noqa: PLC0415

    namespace, name = parse_deployment(deployment)
    try:
        api = api_client(secrets)
    except (ConfigException, OSError) as exc:
        raise EnvoyError(
            f"deployment {deployment}: no usable Kubernetes configuration: {exc}"
        ) from exc
    where = f"deployment {namespace}/{name}"
    doc = read_json(
        client.AppsV1Api(api).read_namespaced_deployment,
        name,
        namespace,
        what=f"read {where}",
        error=EnvoyError,
    )
    doc.setdefault("kind", "Deployment")
    docs: list[Any] = [doc]
    override = facts_from_deployment(doc, where).bootstrap_override
    if override:
        configmap = read_json(
            client.CoreV1Api(api).read_namespaced_config_map,
            override,
            namespace,
            what=f"read configmap {namespace}/{override}",
            error=EnvoyError,
        )
        docs.append({**configmap, "kind": "ConfigMap"})
    custom = client.CustomObjectsApi(api)
    try:
        filters = read_json(
            custom.list_namespaced_custom_object,
            "networking.istio.io",
            "v1alpha3",
            namespace,
            "envoyfilters",
            what=f"list envoyfilters in {namespace}",
            error=EnvoyError,
        )
    except EnvoyError as exc:
        if status_of(exc.__cause__) != 404:  # HTTP Not Found: no EnvoyFilter CRD
            raise
        filters = {"items": []}
    docs += [{**item, "kind": "EnvoyFilter"} for item in filters.get("items") or []]
    return facts_from_documents(docs, origin=f"the cluster ({where})")


def _read_existing(path: str) -> GatewayFacts:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidArgument(f"existing: cannot read {path!r}: {exc.strerror or exc}") from None
    try:
        docs = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        raise InvalidArgument(f"existing: {path} is not YAML: {exc}") from None
    if not docs:
        raise InvalidArgument(f"existing: {path} holds no manifest")
    return facts_from_documents(docs, origin=path)


def load_facts(
    *,
    existing: Sequence[str] = (),
    deployment: str = "",
    memory_limit: str = "",
    secrets: Mapping[str, Any] | None = None,
) -> GatewayFacts:
    """The gateway's facts from ``--existing`` files, the live ``--deployment`` and
    ``--memory-limit`` (which overrides the Deployment's)."""
    facts = GatewayFacts()
    for path in existing:
        facts = merged_facts(facts, _read_existing(path))
    if deployment:
        facts = merged_facts(facts, read_gateway(deployment, secrets=secrets))
    return with_memory_limit(facts, memory_limit)
