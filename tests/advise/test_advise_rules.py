"""The rules' edges, as pure functions over manifests (the cluster tests run the CLI)."""

from __future__ import annotations

from typing import Any

import pytest

from chaos_ext._products.advise.fetch import DbSettings
from chaos_ext._products.advise.rules import PoolSource, effective_ndots, pool_size


@pytest.mark.parametrize(
    ("spec", "ndots"),
    [
        ({}, 5),  # ClusterFirst is the default
        ({"dnsPolicy": "ClusterFirst", "hostNetwork": True}, None),  # falls back to Default
        ({"dnsPolicy": "ClusterFirstWithHostNet", "hostNetwork": True}, 5),
        ({"dnsPolicy": "Default"}, None),  # the node's resolv.conf: not known here
        ({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["10.0.0.10"]}}, 1),
        ({"dnsConfig": {"options": [{"name": "ndots", "value": "2"}]}}, 2),
        ({"dnsConfig": {"options": [{"name": "ndots", "value": "5"}]}}, 5),
        ({"dnsConfig": {"options": [{"name": "timeout", "value": "2"}]}}, 5),
    ],
)
def test_the_ndots_the_kubelet_writes(spec: dict[str, Any], ndots: int | None) -> None:
    assert effective_ndots(spec) == ndots


def _deployment(env: list[dict[str, Any]], annotations: dict[str, str] | None = None) -> Any:
    template = {
        "metadata": {"annotations": annotations or {}},
        "spec": {"containers": [{"env": env}]},
    }
    return {"metadata": {"name": "api", "namespace": "shop"}, "spec": {"template": template}}


def test_the_pool_size_is_a_literal_env_value_or_an_annotation() -> None:
    env = PoolSource(env="DB_POOL_SIZE")
    assert pool_size(_deployment([{"name": "DB_POOL_SIZE", "value": "8"}]), env) == 8
    from_config = {
        "name": "DB_POOL_SIZE",
        "valueFrom": {"configMapKeyRef": {"name": "x", "key": "y"}},
    }
    assert pool_size(_deployment([from_config]), env) is None  # not readable from the manifest
    annotated = _deployment([], {"example.com/pool": "12"})
    assert pool_size(annotated, PoolSource(annotation="example.com/pool")) == 12


def test_postgresql_16_reserved_connections_lower_the_ceiling() -> None:
    settings = DbSettings(max_connections=100, superuser_reserved=3, reserved=5)
    assert settings.usable == 92
    assert "reserved_connections 5" in settings.evidence()
