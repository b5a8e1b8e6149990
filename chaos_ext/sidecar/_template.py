"""What the sidecar injector would inject today, read from its ConfigMap (pure functions).

Istio (``template_format="istio"``): the ``istio-sidecar-injector`` ConfigMap
holds ``values`` (JSON: hub, tag, proxy image, resources, log levels, revision,
CA address...) and ``config`` (YAML: the Go templates and
``injectedAnnotations``). We do not execute Istio's Go template; we compute
the fields of the ``istio-proxy`` container that the template takes from
``values`` and from the pod's own ``sidecar.istio.io/*`` annotations, the way
the template does:

* image: ``sidecar.istio.io/proxyImage`` if it contains ``/``, else
  ``values.global.proxy.image`` if it contains ``/``, else
  ``<hub>/<image>:<tag>[-<variant>]``; the ``istio-init`` image likewise from
  ``proxy_init.image``;
* args: ``proxy sidecar --domain $(POD_NAMESPACE).svc.<clusterDomain>
  --proxyLogLevel= --proxyComponentLogLevel= --log_output_level=`` (pod
  annotations ``logLevel``/``componentLogLevel``/``agentLogLevel`` win),
  plus ``--stsPort``, ``--log_as_json``, ``--outlierLogPath`` when set;
* env: ``PILOT_CERT_PROVIDER``, ``CA_ADDR``, ``ISTIO_META_CLUSTER_ID`` and
  ``ISTIO_META_NETWORK`` when set;
* resources: ``proxyCPU``/``proxyMemory``/``proxyCPULimit``/``proxyMemoryLimit``
  annotations if any is present, else ``values.global.proxy.resources``;
* revision (``values.revision`` or ``default``), compared with the pod's
  ``sidecar.istio.io/status`` annotation, and ``injectedAnnotations``.

Generic (``template_format="container"``): one key holds the container
spec (YAML or JSON: image, args, env, resources) that is injected as is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from chaos_ext.errors import InvalidArgument
from chaos_ext.sidecar.errors import SidecarError

__all__ = [
    "ANNOTATION_PREFIX",
    "Expected",
    "SidecarTemplate",
    "changed_data",
    "merge_patch",
    "template_from_configmap",
]

ANNOTATION_PREFIX = "sidecar.istio.io/"
_RESOURCE_ANNOTATIONS = {
    ("requests", "cpu"): "proxyCPU",
    ("requests", "memory"): "proxyMemory",
    ("limits", "cpu"): "proxyCPULimit",
    ("limits", "memory"): "proxyMemoryLimit",
}


@dataclass(frozen=True)
class Expected:
    """The sidecar one pod should have under the current template."""

    image: str
    init_image: str | None
    args: tuple[str, ...] | None  # None: not checked
    env: Mapping[str, str]
    resources: Mapping[str, Mapping[str, str]]
    revision: str | None
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SidecarTemplate:
    """The injector's current settings; :meth:`expected_for` applies a pod's overrides."""

    format: str
    image: str
    init_image: str | None
    cluster_domain: str = "cluster.local"
    log_level: str = "warning"
    component_log_level: str = "misc:error"
    agent_log_level: str = "default:info"
    extra_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    resources: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    revision: str | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    fixed_args: tuple[str, ...] | None = None  # generic format: the args as given
    _cache: dict[tuple[tuple[str, str], ...], Expected] = field(
        default_factory=dict, compare=False, repr=False
    )  # per distinct set of sidecar.istio.io/* annotations

    def summary(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "image": self.image,
            "revision": self.revision,
            "resources": {k: dict(v) for k, v in self.resources.items()},
            "env": dict(self.env),
        }

    def expected_for(self, annotations: Mapping[str, str]) -> Expected:
        """The expected sidecar for a pod with these annotations."""
        relevant = tuple(
            (k, str(v)) for k, v in annotations.items() if k.startswith(ANNOTATION_PREFIX)
        )
        found = self._cache.get(relevant)
        if found is None:
            found = self._cache[relevant] = self._expected(dict(relevant))
        return found

    def _expected(self, annotations: Mapping[str, str]) -> Expected:
        if self.format != "istio":
            return Expected(self.image, None, self.fixed_args, self.env, self.resources, None)

        def note(name: str, default: str) -> str:
            return str(annotations.get(ANNOTATION_PREFIX + name, default))

        override = note("proxyImage", "")
        image = override if "/" in override else self.image
        args = (
            "proxy",
            "sidecar",
            "--domain",
            f"$(POD_NAMESPACE).svc.{self.cluster_domain}",
            f"--proxyLogLevel={note('logLevel', self.log_level)}",
            f"--proxyComponentLogLevel={note('componentLogLevel', self.component_log_level)}",
            f"--log_output_level={note('agentLogLevel', self.agent_log_level)}",
            *self.extra_args,
        )
        init_image = override if "/" in override else self.init_image
        return Expected(
            image,
            init_image,
            args,
            self.env,
            _resources_for(self.resources, annotations),
            self.revision,
            self.annotations,
        )


def _resources_for(
    default: Mapping[str, Mapping[str, str]], annotations: Mapping[str, str]
) -> Mapping[str, Mapping[str, str]]:
    names = {key: ANNOTATION_PREFIX + name for key, name in _RESOURCE_ANNOTATIONS.items()}
    if not any(n in annotations for n in names.values()):
        return default
    found: dict[str, dict[str, str]] = {}
    for (section, resource), name in names.items():
        if name in annotations:
            found.setdefault(section, {})[resource] = str(annotations[name])
    return found


def _dig(data: Mapping[str, Any], path: str, default: Any = None) -> Any:
    value: Any = data
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return default
        value = value[part]
    return default if value is None else value


def _image(values: Mapping[str, Any], name: str) -> str:
    if "/" in name:
        return name
    hub, tag = _dig(values, "global.hub", ""), str(_dig(values, "global.tag", ""))
    variant = _dig(values, "global.variant", "")
    suffix = f"-{variant}" if variant and variant != "default" else ""
    return f"{hub}/{name}:{tag}{suffix}"


def _parse(text: str, key: str, kind: str) -> Any:
    try:
        return json.loads(text) if kind == "json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise SidecarError(
            f"injector ConfigMap key {key!r} is not valid {kind.upper()}: {exc}"
        ) from exc


def _istio_inputs(
    data: Mapping[str, str], values_key: str, config_key: str
) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The injector's values (JSON) and config (YAML) from its ConfigMap data."""
    if values_key not in data:
        raise SidecarError(
            f"injector ConfigMap has no {values_key!r} key (keys: {sorted(data)});"
            " set values_key, or template_format='container' for a non-Istio injector"
        )
    values = _parse(data[values_key], values_key, "json") or {}
    config = _parse(data[config_key], config_key, "yaml") if config_key in data else {}
    return values, config or {}


def _istio_extra_args(values: Mapping[str, Any], proxy: Mapping[str, Any]) -> tuple[str, ...]:
    """Arguments the template adds to ``pilot-agent proxy sidecar`` from the values."""
    extra: list[str] = []
    if _dig(values, "global.sts.servicePort", 0):
        extra.append(f"--stsPort={_dig(values, 'global.sts.servicePort')}")
    if _dig(values, "global.logAsJson", False):
        extra.append("--log_as_json")
    if proxy.get("outlierLogPath"):
        extra.append(f"--outlierLogPath={proxy['outlierLogPath']}")
    return tuple(extra)


def _istio_env(values: Mapping[str, Any], revision: str) -> dict[str, str]:
    """The environment the template sets from the values (CA address, cluster, network)."""
    istio_ns = _dig(values, "global.istioNamespace", "istio-system")
    ca_default = f"istiod{'-' + revision if revision else ''}.{istio_ns}.svc:15012"
    cluster = _dig(values, "global.multiCluster.clusterName", "") or "Kubernetes"
    env = {
        "PILOT_CERT_PROVIDER": str(_dig(values, "global.pilotCertProvider", "istiod")),
        "CA_ADDR": str(_dig(values, "global.caAddress", "") or ca_default),
        "ISTIO_META_CLUSTER_ID": str(cluster),
    }
    if _dig(values, "global.network", ""):
        env["ISTIO_META_NETWORK"] = str(_dig(values, "global.network"))
    return env


def _istio_resources(proxy: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """``global.proxy.resources`` as text quantities (unset amounts left out)."""
    return {
        section: {k: str(v) for k, v in (amounts or {}).items() if v is not None}
        for section, amounts in (proxy.get("resources") or {}).items()
    }


def _istio(data: Mapping[str, str], values_key: str, config_key: str) -> SidecarTemplate:
    """What Istio's injector injects today: read its values and config, then each part."""
    values, config = _istio_inputs(data, values_key, config_key)
    proxy = _dig(values, "global.proxy", {})
    revision = str(_dig(values, "revision", "") or "")
    annotations = config.get("injectedAnnotations") or {}
    return SidecarTemplate(
        format="istio",
        image=_image(values, str(proxy.get("image", "proxyv2"))),
        init_image=_image(values, str(_dig(values, "global.proxy_init.image", "proxyv2"))),
        cluster_domain=str(proxy.get("clusterDomain", "cluster.local")),
        log_level=str(proxy.get("logLevel", "warning")),
        component_log_level=str(proxy.get("componentLogLevel", "misc:error")),
        agent_log_level=str(_dig(values, "global.logging.level", "default:info")),
        extra_args=_istio_extra_args(values, proxy),
        env=_istio_env(values, revision),
        resources=_istio_resources(proxy),
        revision=revision or "default",
        annotations={str(k): str(v) for k, v in annotations.items()},
    )


def _container(data: Mapping[str, str], key: str) -> SidecarTemplate:
    if key not in data:
        raise SidecarError(f"injector ConfigMap has no {key!r} key (keys: {sorted(data)})")
    spec = _parse(data[key], key, "yaml") or {}
    if not isinstance(spec, Mapping) or not spec.get("image"):
        raise SidecarError(f"injector ConfigMap key {key!r} must hold a container with an image")
    env = {str(e["name"]): str(e["value"]) for e in spec.get("env") or [] if "value" in e}
    args = spec.get("args")
    return SidecarTemplate(
        format="container",
        image=str(spec["image"]),
        init_image=None,
        env=env,
        resources={
            s: {k: str(v) for k, v in (r or {}).items()}
            for s, r in (spec.get("resources") or {}).items()
        },
        fixed_args=tuple(str(a) for a in args) if args is not None else None,
    )


def template_from_configmap(
    data: Mapping[str, str], *, template_format: str, values_key: str, config_key: str
) -> SidecarTemplate:
    """Read the injector's settings from a ConfigMap's ``data``."""
    if template_format == "istio":
        return _istio(data, values_key, config_key)
    if template_format == "container":
        return _container(data, values_key)
    raise SidecarError(f"template_format {template_format!r} is not 'istio' or 'container'")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: dicts merge recursively, ``None`` deletes, the rest replaces."""
    if not isinstance(patch, Mapping):
        return patch
    merged = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def changed_data(
    current: Mapping[str, str],
    *,
    values_key: str,
    values_patch: Mapping[str, Any] | None,
    data: Mapping[str, Any] | None,
) -> dict[str, str]:
    """The ConfigMap keys a template change rewrites, with their new text.

    ``data`` replaces whole keys; ``values_patch`` is merged (RFC 7386) into
    the JSON under ``values_key``. Keys that would not change are left out;
    a change that changes nothing is refused.
    """
    new: dict[str, str] = {}
    for key, text in (data or {}).items():
        if not isinstance(text, str):
            raise InvalidArgument(f"data[{key!r}]: ConfigMap values are strings, got {text!r:.40}")
        if current.get(key) != text:
            new[key] = text
    if values_patch:
        if values_key in (data or {}):
            raise InvalidArgument(
                f"give {values_key!r} either in data or as values_patch, not both"
            )
        if values_key not in current:
            raise SidecarError(
                f"the ConfigMap has no {values_key!r} key to patch (keys: {sorted(current)})"
            )
        before = _parse(current[values_key], values_key, "json")
        after = merge_patch(before, values_patch)
        if after != before:
            new[values_key] = json.dumps(after, indent=2)
    if not new:
        raise InvalidArgument("the change leaves the injector ConfigMap as it is: nothing to do")
    return new
