"""The Kubernetes plumbing: streamed list decoding, clients without process-wide state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.config import kube_config

from chaos_ext._core.jsonlist import stream_items
from chaos_ext._core.k8s import api_client

FIXTURES = Path(__file__).parent / "fixtures" / "kubernetes"


def _streamed(text: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    envelope: dict[str, Any] = {}
    return list(stream_items(text, envelope)), envelope


def test_a_real_kubectl_list_streams_like_json_loads() -> None:
    text = (FIXTURES / "kubectl-get-pods-minikube.json").read_text()
    items, envelope = _streamed(text)
    whole = json.loads(text)
    assert items == whole["items"] and [i["metadata"]["name"] for i in items] == ["queue-l4dv8"]
    assert envelope == {k: v for k, v in whole.items() if k != "items"}  # metadata came after


@pytest.mark.parametrize(
    "text",
    [
        '{"kind":"PodList","metadata":{"continue":"abc"},"items":[]}',
        ' { "items" : [ {"a":[1,{"b":"]"}]} , {"c":"\\u00e9\\"}"} ] , "metadata" : {} } \n',
        '{"items":[{}],"apiVersion":"v1","items2":[1,2]}',
        "{}",
    ],
)
def test_odd_but_valid_lists(text: str) -> None:
    items, envelope = _streamed(text)
    whole = json.loads(text)
    assert items == whole.get("items", [])
    assert envelope == {k: v for k, v in whole.items() if k != "items"}


@pytest.mark.parametrize(
    "text",
    ['{"items":[{"a":1}', '{"items":[{"a":1},]}', '{"items":[1]}', "[]", '{"items":[]} x', ""],
)
def test_invalid_lists_raise_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        _streamed(text)


def _kubeconfig(path: Path, hosts: dict[str, str]) -> Path:
    contexts = [{"name": n, "context": {"cluster": n, "user": "u"}} for n in hosts]
    clusters = [{"name": n, "cluster": {"server": h}} for n, h in hosts.items()]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters,
        "contexts": contexts,
        "users": [{"name": "u", "user": {"token": "t"}}],
        "current-context": next(iter(hosts)),
    }
    path.write_text(json.dumps(config))
    return path


def test_clients_leave_the_kubernetes_modules_defaults_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    default_location = kube_config.KUBE_CONFIG_DEFAULT_LOCATION
    default_host = client.Configuration.get_default_copy().host
    hosts = {"blue": "https://10.0.0.1:6443", "green": "https://10.0.0.2:6443"}
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path / "kubeconfig", hosts)))
    blue = api_client()
    green = api_client({"KUBERNETES_CONTEXT": "green"})
    again = api_client()
    assert blue.configuration.host == again.configuration.host == hosts["blue"]
    assert green.configuration.host == hosts["green"]
    assert kube_config.KUBE_CONFIG_DEFAULT_LOCATION == default_location
    assert client.Configuration.get_default_copy().host == default_host


def test_kubeconfig_is_read_when_the_client_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _kubeconfig(tmp_path / "one", {"one": "https://10.0.1.1:6443"})
    second = _kubeconfig(tmp_path / "two", {"two": "https://10.0.2.2:6443"})
    monkeypatch.setenv("KUBECONFIG", str(first))
    assert api_client().configuration.host == "https://10.0.1.1:6443"
    monkeypatch.setenv("KUBECONFIG", str(second))
    assert api_client().configuration.host == "https://10.0.2.2:6443"
