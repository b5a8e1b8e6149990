"""Istio-injected pods and the injector ConfigMap, shaped like a real Istio 1.22 install.

``inject(pod, values)`` is a hand-written stand-in for Istio's mutating
webhook: it adds ``istio-init`` and ``istio-proxy`` (image, args, env with
field references, ports, probes, resources, security context, mounts), the
volumes, labels and annotations (``sidecar.istio.io/status``, ``istio.io/rev``,
``kubectl.kubernetes.io/default-container``, prometheus scraping) the way
Istio's ``sidecar`` template renders them, honouring the per-pod
``sidecar.istio.io/*`` overrides. It is written independently of
``chaos_ext.sidecar`` so the tests compare two readings of the same ConfigMap.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from support import k8s_objects as o

__all__ = [
    "INJECT_LABEL",
    "inject",
    "injector_configmap",
    "injector_from_cluster",
    "injector_values",
    "mesh_deployment",
]

Obj = dict[str, Any]
INJECT_LABEL = "sidecar.istio.io/inject"
_VOLUMES = [
    "workload-socket",
    "credential-socket",
    "workload-certs",
    "istio-envoy",
    "istio-data",
    "istio-podinfo",
    "istio-token",
    "istiod-ca-cert",
]

_CONFIG = """\
defaultTemplates: [sidecar]
policy: enabled
alwaysInjectSelector:
  []
neverInjectSelector:
  []
injectedAnnotations:
template: "{{ Template_Version_And_Istio_Version_Mismatched_Check_Installation }}"
templates:
  sidecar: |
    {{- define "resources"  }}
      {{- if or (isset .ObjectMeta.Annotations `sidecar.istio.io/proxyCPU`) }}
      requests:
        cpu: {{ index .ObjectMeta.Annotations `sidecar.istio.io/proxyCPU` | quote }}
      {{- else }}
      {{ toYaml .Values.global.proxy.resources | indent 6 }}
      {{- end }}
    {{- end }}
    spec:
      containers:
      - name: istio-proxy
        image: "{{ .ProxyImage }}"
        args:
        - proxy
        - sidecar
        - --domain
        - $(POD_NAMESPACE).svc.{{ .Values.global.proxy.clusterDomain }}
        - --proxyLogLevel={{ annotation .ObjectMeta `sidecar.istio.io/logLevel` "warning" }}
  gateway: |
    spec:
      containers:
      - name: istio-proxy
        image: "{{ .ProxyImage }}"
"""


def injector_values(
    *,
    hub: str = "docker.io/istio",
    tag: str = "1.22.3",
    revision: str = "",
    cpu: str = "100m",
    memory: str = "128Mi",
    cpu_limit: str = "2000m",
    memory_limit: str = "1024Mi",
    log_level: str = "warning",
) -> Obj:
    """The ``values`` of a default istiod install (trimmed of the gateway sections)."""
    return {
        "global": {
            "caAddress": "",
            "caName": "",
            "configCluster": False,
            "configValidation": True,
            "defaultPodDisruptionBudget": {"enabled": True},
            "hub": hub,
            "imagePullPolicy": "",
            "imagePullSecrets": [],
            "istioNamespace": "istio-system",
            "logAsJson": False,
            "logging": {"level": "default:info"},
            "meshID": "",
            "meshNetworks": {},
            "mountMtlsCerts": False,
            "multiCluster": {"clusterName": "", "enabled": False},
            "network": "",
            "pilotCertProvider": "istiod",
            "priorityClassName": "",
            "proxy": {
                "autoInject": "enabled",
                "clusterDomain": "cluster.local",
                "componentLogLevel": "misc:error",
                "enableCoreDump": False,
                "excludeIPRanges": "",
                "excludeInboundPorts": "",
                "excludeOutboundPorts": "",
                "image": "proxyv2",
                "includeIPRanges": "*",
                "includeInboundPorts": "*",
                "includeOutboundPorts": "",
                "logLevel": log_level,
                "outlierLogPath": "",
                "privileged": False,
                "readinessFailureThreshold": 4,
                "readinessInitialDelaySeconds": 0,
                "readinessPeriodSeconds": 15,
                "resources": {
                    "limits": {"cpu": cpu_limit, "memory": memory_limit},
                    "requests": {"cpu": cpu, "memory": memory},
                },
                "startupProbe": {"enabled": True, "failureThreshold": 600},
                "statusPort": 15020,
                "tracer": "none",
            },
            "proxy_init": {"forceApplyIptables": False, "image": "proxyv2"},
            "remotePilotAddress": "",
            "sds": {"token": {"aud": "istio-ca"}},
            "sts": {"servicePort": 0},
            "tag": tag,
            "variant": "",
        },
        "pilot": {"cni": {"enabled": False, "provider": "default"}},
        "revision": revision,
        "sidecarInjectorWebhook": {
            "alwaysInjectSelector": [],
            "defaultTemplates": [],
            "enableNamespacesByDefault": False,
            "injectedAnnotations": {},
            "neverInjectSelector": [],
            "rewriteAppHTTPProbe": True,
            "templates": {},
        },
    }


def injector_configmap(
    values: Obj, *, name: str = "istio-sidecar-injector", namespace: str = "istio-system"
) -> Obj:
    cm = o.configmap(namespace, name, {"config": _CONFIG, "values": json.dumps(values, indent=2)})
    cm["metadata"]["labels"] = {
        "app": "sidecar-injector",
        "istio.io/rev": values["revision"] or "default",
        "install.operator.istio.io/owning-resource": "unknown",
        "release": "istio",
    }
    return cm


def _image(values: Obj, name: str, override: str) -> str:
    if "/" in override:
        return override
    if "/" in name:
        return name
    g = values["global"]
    variant = f"-{g['variant']}" if g.get("variant") else ""
    return f"{g['hub']}/{name}:{g['tag']}{variant}"


def _resources(values: Obj, notes: dict[str, str]) -> Obj:
    keys = {
        ("requests", "cpu"): "proxyCPU",
        ("requests", "memory"): "proxyMemory",
        ("limits", "cpu"): "proxyCPULimit",
        ("limits", "memory"): "proxyMemoryLimit",
    }
    present = {
        k: notes[f"sidecar.istio.io/{n}"]
        for k, n in keys.items()
        if f"sidecar.istio.io/{n}" in notes
    }
    if not present:
        return copy.deepcopy(values["global"]["proxy"]["resources"])
    out: Obj = {}
    for (section, resource), amount in present.items():
        out.setdefault(section, {})[resource] = amount
    return out


def _field(name: str, path: str) -> Obj:
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}


def _resource_field(name: str, resource: str) -> Obj:
    return {"name": name, "valueFrom": {"resourceFieldRef": {"divisor": "0", "resource": resource}}}


def _proxy_env(pod: Obj, values: Obj, app_containers: list[Obj]) -> list[Obj]:
    g = values["global"]
    revision = values["revision"]
    ports = [p for c in app_containers for p in c.get("ports", [])]
    owner = (pod["metadata"].get("ownerReferences") or [{}])[0]
    workload = pod["metadata"].get("labels", {}).get("app", pod["metadata"]["name"])
    return [
        {"name": "PILOT_CERT_PROVIDER", "value": g["pilotCertProvider"]},
        {
            "name": "CA_ADDR",
            "value": g["caAddress"]
            or f"istiod{'-' + revision if revision else ''}.{g['istioNamespace']}.svc:15012",
        },
        _field("POD_NAME", "metadata.name"),
        _field("POD_NAMESPACE", "metadata.namespace"),
        _field("INSTANCE_IP", "status.podIP"),
        _field("SERVICE_ACCOUNT", "spec.serviceAccountName"),
        _field("HOST_IP", "status.hostIP"),
        _resource_field("ISTIO_CPU_LIMIT", "limits.cpu"),
        {"name": "PROXY_CONFIG", "value": "{}\n"},
        {"name": "ISTIO_META_POD_PORTS", "value": json.dumps(ports, indent=1)},
        {
            "name": "ISTIO_META_APP_CONTAINERS",
            "value": ",".join(c["name"] for c in app_containers),
        },
        _resource_field("GOMEMLIMIT", "limits.memory"),
        _resource_field("GOMAXPROCS", "limits.cpu"),
        {
            "name": "ISTIO_META_CLUSTER_ID",
            "value": g["multiCluster"]["clusterName"] or "Kubernetes",
        },
        _field("ISTIO_META_NODE_NAME", "spec.nodeName"),
        {"name": "ISTIO_META_INTERCEPTION_MODE", "value": "REDIRECT"},
        {"name": "ISTIO_META_WORKLOAD_NAME", "value": workload},
        {
            "name": "ISTIO_META_OWNER",
            "value": f"kubernetes://apis/apps/v1/namespaces/"
            f"{pod['metadata']['namespace']}/{owner.get('kind', 'Pod').lower()}s/{workload}",
        },
        {"name": "ISTIO_META_MESH_ID", "value": "cluster.local"},
        {"name": "TRUST_DOMAIN", "value": "cluster.local"},
    ]


_MOUNTS = [
    {"mountPath": "/var/run/secrets/workload-spiffe-uds", "name": "workload-socket"},
    {"mountPath": "/var/run/secrets/credential-uds", "name": "credential-socket"},
    {"mountPath": "/var/run/secrets/workload-spiffe-credentials", "name": "workload-certs"},
    {"mountPath": "/var/run/secrets/istio", "name": "istiod-ca-cert"},
    {"mountPath": "/var/lib/istio/data", "name": "istio-data"},
    {"mountPath": "/etc/istio/proxy", "name": "istio-envoy"},
    {"mountPath": "/var/run/secrets/tokens", "name": "istio-token"},
    {"mountPath": "/etc/istio/pod", "name": "istio-podinfo"},
]


def _proxy(pod: Obj, values: Obj, notes: dict[str, str], app_containers: list[Obj]) -> Obj:
    g, proxy = values["global"], values["global"]["proxy"]
    note = lambda key, default: notes.get(f"sidecar.istio.io/{key}", default)  # noqa: E731
    return {
        "name": "istio-proxy",
        "image": _image(values, proxy["image"], note("proxyImage", "")),
        "args": [
            "proxy",
            "sidecar",
            "--domain",
            f"$(POD_NAMESPACE).svc.{proxy['clusterDomain']}",
            f"--proxyLogLevel={note('logLevel', proxy['logLevel'])}",
            f"--proxyComponentLogLevel={note('componentLogLevel', proxy['componentLogLevel'])}",
            f"--log_output_level={note('agentLogLevel', g['logging']['level'])}",
        ],
        "env": _proxy_env(pod, values, app_containers),
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"containerPort": 15090, "name": "http-envoy-prom", "protocol": "TCP"}],
        "readinessProbe": {
            "failureThreshold": 4,
            "httpGet": {"path": "/healthz/ready", "port": 15021, "scheme": "HTTP"},
            "periodSeconds": 15,
            "successThreshold": 1,
            "timeoutSeconds": 3,
        },
        "startupProbe": {
            "failureThreshold": 600,
            "httpGet": {"path": "/healthz/ready", "port": 15021, "scheme": "HTTP"},
            "periodSeconds": 1,
            "successThreshold": 1,
            "timeoutSeconds": 3,
        },
        "resources": _resources(values, notes),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "runAsGroup": 1337,
            "runAsNonRoot": True,
            "runAsUser": 1337,
        },
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "volumeMounts": [dict(m) for m in _MOUNTS],
    }


def _init(values: Obj, notes: dict[str, str]) -> Obj:
    return {
        "name": "istio-init",
        "image": _image(
            values,
            values["global"]["proxy_init"]["image"],
            notes.get("sidecar.istio.io/proxyImage", ""),
        ),
        "args": [
            "istio-iptables",
            "-p",
            "15001",
            "-z",
            "15006",
            "-u",
            "1337",
            "-m",
            "REDIRECT",
            "-i",
            "*",
            "-x",
            "",
            "-b",
            "*",
            "-d",
            "15090,15021,15020",
            "--log_output_level=default:info",
        ],
        "imagePullPolicy": "IfNotPresent",
        "resources": _resources(values, notes),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]},
            "privileged": False,
            "readOnlyRootFilesystem": False,
            "runAsGroup": 0,
            "runAsNonRoot": False,
            "runAsUser": 0,
        },
    }


def _volumes() -> list[Obj]:
    return [
        {"emptyDir": {}, "name": "workload-socket"},
        {"emptyDir": {}, "name": "credential-socket"},
        {"emptyDir": {}, "name": "workload-certs"},
        {"emptyDir": {"medium": "Memory"}, "name": "istio-envoy"},
        {"emptyDir": {}, "name": "istio-data"},
        {
            "downwardAPI": {
                "defaultMode": 420,
                "items": [
                    {
                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels"},
                        "path": "labels",
                    },
                    {
                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.annotations"},
                        "path": "annotations",
                    },
                ],
            },
            "name": "istio-podinfo",
        },
        {
            "name": "istio-token",
            "projected": {
                "defaultMode": 420,
                "sources": [
                    {
                        "serviceAccountToken": {
                            "audience": "istio-ca",
                            "expirationSeconds": 43200,
                            "path": "istio-token",
                        }
                    }
                ],
            },
        },
        {"configMap": {"defaultMode": 420, "name": "istio-ca-root-cert"}, "name": "istiod-ca-cert"},
    ]


def inject(pod: Obj, values: Obj, *, native: bool = False) -> Obj:
    """The pod as Istio's webhook would admit it (``native``: proxy as a native sidecar)."""
    pod = copy.deepcopy(pod)
    meta, spec = pod["metadata"], pod["spec"]
    notes = meta.setdefault("annotations", {})
    apps = [c for c in spec["containers"] if c["name"] != "istio-proxy"]
    proxy = _proxy(pod, values, notes, apps)
    init = _init(values, notes)
    if native:
        proxy["restartPolicy"] = "Always"
        spec["initContainers"] = [init, proxy]
        spec["containers"] = apps
    else:
        spec["initContainers"] = [init]
        spec["containers"] = [*apps, proxy]
    spec["volumes"] = [*spec.get("volumes", []), *_volumes()]
    revision = values["revision"] or "default"
    status = {
        "initContainers": ["istio-init"],
        "containers": ["istio-proxy"],
        "volumes": _VOLUMES,
        "imagePullSecrets": None,
        "revision": revision,
    }
    notes.update(
        {
            "istio.io/rev": revision,
            "kubectl.kubernetes.io/default-container": apps[0]["name"],
            "kubectl.kubernetes.io/default-logs-container": apps[0]["name"],
            "prometheus.io/path": "/stats/prometheus",
            "prometheus.io/port": "15020",
            "prometheus.io/scrape": "true",
            "sidecar.istio.io/status": json.dumps(status, separators=(",", ":")),
        }
    )
    app = meta.get("labels", {}).get("app", meta["name"])
    meta.setdefault("labels", {}).update(
        {
            "security.istio.io/tlsMode": "istio",
            "service.istio.io/canonical-name": app,
            "service.istio.io/canonical-revision": "latest",
        }
    )
    statuses = pod.get("status", {}).get("containerStatuses")
    if statuses is not None:
        pod["status"]["containerStatuses"] = [
            *statuses,
            {**statuses[0], "name": "istio-proxy", "image": proxy["image"]},
        ]
    return pod


def injector_from_cluster(
    name: str = "istio-sidecar-injector", namespace: str = "istio-system"
) -> Any:
    """An emulator injector: pods labelled ``sidecar.istio.io/inject=true`` get the sidecar
    that the injector ConfigMap in the emulated cluster says, at creation."""

    def admit(pod: Obj, cluster: Any) -> Obj:
        if pod["metadata"].get("labels", {}).get(INJECT_LABEL) != "true":
            return pod
        cm = cluster.get(("", "v1", "configmaps"), namespace, name)
        if cm is None:
            return pod
        return inject(pod, json.loads(cm["data"]["values"]))

    return admit


def mesh_deployment(
    ns: str,
    name: str,
    *,
    replicas: int,
    nodes: list[str],
    values: Obj,
    template_annotations: dict[str, str] | None = None,
    native: bool = False,
    seed: int = 0,
    started: Any = None,
) -> list[Obj]:
    """A Deployment whose pods were injected under ``values`` (its template carries the label)."""
    objs = o.deployment(
        ns,
        name,
        replicas=replicas,
        nodes=nodes,
        labels={INJECT_LABEL: "true"},
        seed=seed,
        started=started,
        annotations=template_annotations,
    )
    return [*objs[:2], *(inject(p, values, native=native) for p in objs[2:])]
