"""The slim decoding of pod and ReplicaSet pages gives drift the same answer as the full one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from kubernetes import client
from support import istio_fixtures as istio
from support.k8s_emulator import EmulatorHandle

from chaos_ext._core.jsonlist import stream_items
from chaos_ext._core.k8s import PageDecoder, api_client, iter_items
from chaos_ext.sidecar import _drift
from chaos_ext.sidecar._lean import lean_pods, lean_replicasets
from chaos_ext.sidecar._template import template_from_configmap


def _page(items: list[dict[str, Any]], token: str = "") -> bytes:
    metadata = {"continue": token} if token else {}
    return json.dumps({"kind": "List", "metadata": metadata, "items": items}).encode()


def _full(data: bytes) -> tuple[Iterator[dict[str, Any]], str]:
    return stream_items(data.decode(), {}), ""


def _items(decode: PageDecoder, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = decode(_page(items))
    assert found is not None
    return list(found[0])


def _mesh() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    old, new = istio.injector_values(tag="1.22.3"), istio.injector_values(tag="1.23.1")
    objects: list[dict[str, Any]] = []
    for i, values in enumerate((old, new, old)):
        objects += istio.mesh_deployment(
            "shop", f"svc-{i}", replicas=3, nodes=["worker-0"], values=values, native=i == 2
        )
    pods = [x for x in objects if x["kind"] == "Pod"]
    return pods, [x for x in objects if x["kind"] == "ReplicaSet"]


def test_slim_pages_give_the_same_drift_as_the_full_pages() -> None:
    pods, replicasets = _mesh()
    cm = istio.injector_configmap(istio.injector_values(tag="1.23.1"))
    template = template_from_configmap(
        cm["data"], template_format="istio", values_key="values", config_key="config"
    )
    answers = []
    for decode_pods, decode_rs in ((_full, _full), (lean_pods, lean_replicasets)):
        owners = _drift.owners_of_replicasets(_items(decode_rs, replicasets))
        workloads, without = _drift.analyse(
            _items(decode_pods, pods), owners, template, container_name="istio-proxy"
        )
        answers.append(
            _drift.report(
                workloads, without, template, container_name="istio-proxy", max_workloads=50
            )
        )
    full, slim = answers
    assert slim == full
    assert full["drifted_pods"] == 6, full  # svc-0 and svc-2 (native sidecars) are drifted


def test_the_continue_token_is_read_and_absent_fields_stay_absent() -> None:
    pods, _ = _mesh()
    found = lean_pods(_page(pods[:1], token="next-page"))
    assert found is not None
    items, token = found
    pod = next(items)
    assert token == "next-page"
    assert "volumes" not in pod["spec"]  # what drift does not read is not decoded
    assert "deletionTimestamp" not in pod["metadata"]  # absent, not None
    assert pod["metadata"]["name"] == pods[0]["metadata"]["name"]


def test_a_page_msgspec_refuses_falls_back_to_the_standard_decoding() -> None:
    odd = {"metadata": {"name": "p", "labels": {"app": 1}}}  # a label that is not a string
    assert lean_pods(_page([odd])) is None
    assert lean_pods(b'{"items": [') is None
    assert lean_replicasets(b"not json") is None


def test_iter_items_pages_through_the_emulator_with_either_decoding(
    emulator: EmulatorHandle,
) -> None:
    values = istio.injector_values(tag="1.23.1")
    emulator.put(
        istio.mesh_deployment("shop", "web", replicas=5, nodes=["worker-0"], values=values)
    )
    core = client.CoreV1Api(api_client())

    def names(decode: PageDecoder | None) -> list[str]:
        items = iter_items(
            core.list_pod_for_all_namespaces, what="list pods", page_size=2, decode=decode
        )
        return sorted(pod["metadata"]["name"] for pod in items)

    refused: PageDecoder = lambda _: None  # noqa: E731 - every page falls back
    full = names(None)
    assert len(full) == 5  # three pages of 2: the continue token is followed
    assert names(lean_pods) == full
    assert names(refused) == full
