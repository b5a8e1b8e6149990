"""Sidecar drift on realistic Istio-injected pods (pure functions, no cluster)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from support import istio_fixtures as istio
from support import k8s_objects as o

from chaos_ext.errors import InvalidArgument
from chaos_ext.sidecar._drift import (
    analyse,
    owners_of_replicasets,
    pod_differences,
    report,
    sidecar_container,
    workload_of,
)
from chaos_ext.sidecar._template import changed_data, merge_patch, template_from_configmap
from chaos_ext.sidecar.errors import SidecarError

NODES = ["worker-0", "worker-1"]


def _template(values: dict[str, Any]) -> Any:
    cm = istio.injector_configmap(values)
    return template_from_configmap(
        cm["data"], template_format="istio", values_key="values", config_key="config"
    )


def _diff(pod: dict[str, Any], values: dict[str, Any]) -> list[str]:
    sidecar = sidecar_container(pod, "istio-proxy")
    assert sidecar is not None
    return pod_differences(pod, sidecar, _template(values))


def _pod(values: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    return istio.mesh_deployment("shop", "web", replicas=1, nodes=NODES, values=values, **kwargs)[2]


def test_the_fixture_looks_like_an_injected_pod() -> None:
    pod = _pod(istio.injector_values())
    names = [c["name"] for c in pod["spec"]["containers"]]
    assert names == ["web", "istio-proxy"]
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["istio-init"]
    proxy = pod["spec"]["containers"][1]
    assert proxy["image"] == "docker.io/istio/proxyv2:1.22.3"
    assert proxy["args"][:4] == [
        "proxy",
        "sidecar",
        "--domain",
        "$(POD_NAMESPACE).svc.cluster.local",
    ]
    assert {"name": "PILOT_CERT_PROVIDER", "value": "istiod"} in proxy["env"]
    status = json.loads(pod["metadata"]["annotations"]["sidecar.istio.io/status"])
    assert status["revision"] == "default" and "istio-envoy" in status["volumes"]
    assert pod["metadata"]["labels"]["security.istio.io/tlsMode"] == "istio"


@pytest.mark.parametrize("native", [False, True])
def test_a_freshly_injected_pod_does_not_drift(native: bool) -> None:
    values = istio.injector_values()
    assert _diff(_pod(values, native=native), values) == []


def test_a_new_tag_drifts_the_proxy_and_init_images() -> None:
    pod = _pod(istio.injector_values(tag="1.22.3"))
    found = _diff(pod, istio.injector_values(tag="1.23.1"))
    assert found == [
        "image: docker.io/istio/proxyv2:1.22.3 != docker.io/istio/proxyv2:1.23.1",
        "istio-init image: docker.io/istio/proxyv2:1.22.3 != docker.io/istio/proxyv2:1.23.1",
    ]


def test_resources_are_compared_as_quantities() -> None:
    values = istio.injector_values(cpu_limit="2000m", memory_limit="1024Mi")
    pod = _pod(values)
    proxy = sidecar_container(pod, "istio-proxy")
    assert proxy is not None
    proxy["resources"]["limits"] = {"cpu": "2", "memory": "1Gi"}  # same amounts, other spelling
    pod["spec"]["containers"][1] = proxy
    assert _diff(pod, values) == []
    assert _diff(pod, istio.injector_values(cpu="250m")) == ["resources.requests.cpu: 100m != 250m"]


def test_per_pod_annotation_overrides_are_honoured() -> None:
    notes = {
        "sidecar.istio.io/proxyCPU": "50m",
        "sidecar.istio.io/proxyMemory": "64Mi",
        "sidecar.istio.io/logLevel": "debug",
    }
    pod = _pod(istio.injector_values(), template_annotations=notes)
    assert "--proxyLogLevel=debug" in sidecar_container(pod, "istio-proxy")["args"]  # type: ignore[index]
    # the pod pins its own resources and log level: a values change of those is not drift
    changed = istio.injector_values(cpu="500m", memory="1Gi", log_level="error")
    assert _diff(pod, changed) == []
    assert _diff(pod, istio.injector_values(tag="1.23.1"))[0].startswith("image:")


def test_a_revision_change_drifts_ca_address_and_status() -> None:
    pod = _pod(istio.injector_values())
    found = _diff(pod, istio.injector_values(revision="canary"))
    assert (
        "env CA_ADDR: 'istiod.istio-system.svc:15012' != 'istiod-canary.istio-system.svc:15012'"
        in found
    )
    assert "revision (sidecar.istio.io/status): default != canary" in found


def test_a_log_level_change_drifts_the_args() -> None:
    pod = _pod(istio.injector_values(log_level="warning"))
    assert _diff(pod, istio.injector_values(log_level="info")) == [
        "args: expected --proxyLogLevel=info"
    ]


def test_injected_annotations_from_the_config_key() -> None:
    values = istio.injector_values()
    cm = istio.injector_configmap(values)
    cm["data"]["config"] = cm["data"]["config"].replace(
        "injectedAnnotations:\n", "injectedAnnotations:\n  example.com/mesh: blue\n"
    )
    template = template_from_configmap(
        cm["data"], template_format="istio", values_key="values", config_key="config"
    )
    pod = _pod(values)
    proxy = sidecar_container(pod, "istio-proxy")
    assert proxy is not None
    assert pod_differences(pod, proxy, template) == ["annotation example.com/mesh: None != 'blue'"]


def _cluster(values: dict[str, Any]) -> list[dict[str, Any]]:
    objs = istio.mesh_deployment("shop", "web", replicas=3, nodes=NODES, values=values)
    objs += istio.mesh_deployment("shop", "cart", replicas=2, nodes=NODES, values=values)
    sts = o.statefulset("data", "kafka", replicas=2, nodes=NODES)
    objs += [sts[0], *(istio.inject(p, values) for p in sts[1:])]
    ds = o.daemonset("logging", "fluentbit", nodes=NODES)
    objs += [ds[0], *(istio.inject(p, values) for p in ds[1:])]
    objs += o.deployment("kube-system", "coredns", replicas=2, nodes=NODES)  # not in the mesh
    objs.append(
        istio.inject(
            o.pod(
                "debug",
                "shop",
                node_name="worker-0",
                labels={"app": "debug"},
                spec={"containers": [{"name": "sh", "image": "busybox"}]},
            ),
            values,
        )
    )
    return objs


def test_pods_resolve_to_their_workloads() -> None:
    objs = _cluster(istio.injector_values())
    owners = owners_of_replicasets(x for x in objs if x["kind"] == "ReplicaSet")
    pods = [x for x in objs if x["kind"] == "Pod"]
    kinds = {workload_of(p, owners) for p in pods}
    assert kinds == {
        ("Deployment", "shop", "web"),
        ("Deployment", "shop", "cart"),
        ("StatefulSet", "data", "kafka"),
        ("DaemonSet", "logging", "fluentbit"),
        ("Deployment", "kube-system", "coredns"),
        ("Pod", "shop", "debug"),
    }
    # without the ReplicaSets listed, the pod-template-hash naming rule still finds the Deployment
    assert {workload_of(p, {}) for p in pods} == kinds


def test_analysis_and_report_per_workload() -> None:
    old = _cluster(istio.injector_values(tag="1.22.3"))
    # "cart" was rolled out after the upgrade: its pods already have the new sidecar
    new_values = istio.injector_values(tag="1.23.1")
    started = datetime.now(UTC) + timedelta(minutes=5)
    fresh = istio.mesh_deployment(
        "shop", "cart", replicas=2, nodes=NODES, values=new_values, seed=1, started=started
    )
    objs = [x for x in old if "cart" not in x["metadata"]["name"]] + fresh
    owners = owners_of_replicasets(x for x in objs if x["kind"] == "ReplicaSet")
    pods = [x for x in objs if x["kind"] == "Pod"]
    template = _template(new_values)
    cutoff = datetime.now(UTC) + timedelta(minutes=1)
    workloads, without = analyse(
        pods, owners, template, container_name="istio-proxy", started_before=cutoff
    )
    assert without == 2  # coredns is not in the mesh
    result = report(workloads, without, template, container_name="istio-proxy", max_workloads=2)
    assert (result["pods"], result["drifted_pods"], result["started_before"]) == (10, 8, 8)
    assert (result["workloads"], result["drifted_workloads"]) == (5, 4)
    first, second = result["drifted"]
    assert (first["kind"], first["name"], first["drifted"]) == ("Deployment", "web", 3)
    assert first["differences"][0].startswith("image: docker.io/istio/proxyv2:1.22.3")
    assert second["drifted"] == 2 and result["truncated"] is True
    assert result["expected"]["image"] == "docker.io/istio/proxyv2:1.23.1"


def test_generic_container_template() -> None:
    spec = (
        "image: registry.example.com/agent:2.1\n"
        "args: [--port, '9000']\n"
        "resources:\n  requests: {cpu: 10m}\n"
    )
    template = template_from_configmap(
        {"sidecar": spec}, template_format="container", values_key="sidecar", config_key="config"
    )
    pod = o.pod(
        "p",
        "ns",
        node_name="n",
        labels={},
        spec={
            "containers": [
                {"name": "app", "image": "app"},
                {
                    "name": "agent",
                    "image": "registry.example.com/agent:2.0",
                    "args": ["--port", "9000"],
                    "resources": {"requests": {"cpu": "0.01"}},
                },
            ]
        },
    )
    agent = sidecar_container(pod, "agent")
    assert agent is not None
    assert pod_differences(pod, agent, template) == [
        "image: registry.example.com/agent:2.0 != registry.example.com/agent:2.1"
    ]


def test_unreadable_templates_are_reported() -> None:
    with pytest.raises(SidecarError, match="no 'values' key"):
        template_from_configmap(
            {"config": ""}, template_format="istio", values_key="values", config_key="config"
        )
    with pytest.raises(SidecarError, match="not valid JSON"):
        template_from_configmap(
            {"values": "{nope"}, template_format="istio", values_key="values", config_key="config"
        )


def test_merge_patch_and_changed_data() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}}, {"a": {"b": None, "d": 3}}) == {
        "a": {"c": 2, "d": 3}
    }
    values = istio.injector_values()
    data = istio.injector_configmap(values)["data"]
    new = changed_data(
        data, values_key="values", values_patch={"global": {"tag": "1.23.1"}}, data=None
    )
    assert list(new) == ["values"]
    assert json.loads(new["values"])["global"]["tag"] == "1.23.1"
    with pytest.raises(InvalidArgument, match="nothing to do"):
        changed_data(
            data, values_key="values", values_patch={"global": {"tag": "1.22.3"}}, data=None
        )
    with pytest.raises(InvalidArgument, match="not both"):
        changed_data(data, values_key="values", values_patch={"x": 1}, data={"values": "{}"})
