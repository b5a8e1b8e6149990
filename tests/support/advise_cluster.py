"""A cluster for `gameday advise` tests: apps with a pool size, kube-dns, NodeLocal DNSCache."""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

import pytest

from chaos_ext.cli.main import main
from support import k8s_objects as o

__all__ = ["NODES", "PASSWORD", "app", "kube_dns", "node_local_dns", "run_advise", "with_pod_spec"]

Obj = dict[str, Any]
NODES = ["worker-0", "worker-1", "worker-2"]
PASSWORD = f"Gd-advise-{uuid.uuid4().hex}"  # the PostgreSQL role's


def with_pod_spec(objects: list[Obj], **fields: Any) -> list[Obj]:
    """Set ``fields`` in the pod spec of every workload template and pod of ``objects``."""
    for obj in objects:
        spec = obj["spec"] if obj["kind"] == "Pod" else obj["spec"].get("template", {}).get("spec")
        if spec is not None:
            spec.update(copy.deepcopy(fields))
    return objects


def app(
    ns: str, name: str, *, replicas: int, pool: int | None = None, nodes: list[str] = NODES
) -> list[Obj]:
    """A Deployment whose container says its pool size in DB_POOL_SIZE."""
    env = [] if pool is None else [{"name": "DB_POOL_SIZE", "value": str(pool)}]
    containers = [{"name": name, "image": f"registry.example.com/{name}:1.0", "env": env}]
    return o.deployment(ns, name, replicas=replicas, nodes=nodes, containers=containers)


def kube_dns(*, dnsmasq: bool = True) -> list[Obj]:
    """kube-system/kube-dns (kubedns + dnsmasq + sidecar, as kube-dns ships), its PDB."""
    names = ["kubedns", "dnsmasq", "sidecar"] if dnsmasq else ["kubedns", "sidecar"]
    containers = [{"name": n, "image": f"registry.k8s.io/dns/{n}:1.22.28"} for n in names]
    objs = o.deployment("kube-system", "kube-dns", replicas=2, nodes=NODES, containers=containers)
    objs[0]["metadata"]["labels"] = {"k8s-app": "kube-dns"}
    budget = o.pdb("kube-system", "kube-dns", match_labels={"app": "kube-dns"}, max_unavailable=1)
    return [*with_pod_spec(objs, dnsPolicy="Default"), budget]


def node_local_dns() -> list[Obj]:
    objs = o.daemonset("kube-system", "node-local-dns", nodes=NODES)
    return with_pod_spec(objs, dnsPolicy="Default", hostNetwork=True)


def run_advise(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Obj, str]:
    """`gameday advise --json ARGS` in this process: exit code, the JSON, stderr."""
    capsys.readouterr()
    code = main(["advise", "--json", *args])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else {}), err
