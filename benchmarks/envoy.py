"""Benchmark: audit a ~20 MB Envoy /config_dump (many listeners and clusters).

Builds the dump from the compliant test fixture (an Istio ingress gateway):
dynamic listeners with several SNI filter chains each, thousands of EDS
clusters and route configurations, written with Envoy's own 1-space indent.
Each measurement runs in a fresh interpreter (no warm caches):

* audit: ``edge_config_audit(source=<file>)`` wall time, median of 7 runs;
* anchor: ``json.loads`` of the same bytes (the floor any audit pays), median
  of 7 (interleaved with the audits), so the ratio tells how much the audit adds on top of parsing;
* memory: tracemalloc peak during one audit (Python allocations: the raw
  bytes, the parsed dump, the report), compared with the file size.

Goals (issue 8): under 2 s, under 10x the file size. Last line:
``envoy audit_20mb_s=<median seconds> peak_mb=<tracemalloc peak MiB>``.
"""

from __future__ import annotations

import copy
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "envoy" / "fixtures" / "istio-gateway-edge.json"
TARGET_BYTES = 20 * 1024 * 1024
LISTENERS = 120
CHAINS_PER_LISTENER = 4
RUNS = 7

CHILD = """
import json, sys, time, tracemalloc
mode, path = sys.argv[1], sys.argv[2]
from chaos_ext.envoy.probes import edge_config_audit
if mode == "memory":
    tracemalloc.start()
started = time.perf_counter()
if mode == "anchor":
    with open(path, "rb") as f:
        json.loads(f.read())
    result = {}
else:
    report = edge_config_audit(source=path)
    result = {"checks": report["summary"]["checks"], "passed": report["passed"]}
result["seconds"] = time.perf_counter() - started
if mode == "memory":
    result["peak_bytes"] = tracemalloc.get_traced_memory()[1]
print(json.dumps(result))
"""


def _listener(template: dict[str, Any], index: int) -> dict[str, Any]:
    listener = copy.deepcopy(template)
    port = 10000 + index
    listener["name"] = f"0.0.0.0_{port}"
    listener["address"]["socket_address"]["port_value"] = port
    chains = listener["filter_chains"]
    listener["filter_chains"] = []
    for chain_index in range(CHAINS_PER_LISTENER):
        chain = copy.deepcopy(chains[chain_index % len(chains)])
        chain["filter_chain_match"] = {"server_names": [f"svc-{index}-{chain_index}.example.com"]}
        hcm = chain["filters"][0]["typed_config"]
        hcm["stat_prefix"] = f"outbound_0.0.0.0_{port}"
        hcm["rds"]["route_config_name"] = f"https.{port}.https-{chain_index}.gw-{index}.shop"
        listener["filter_chains"].append(chain)
    return listener


def build_dump(target: int) -> bytes:
    """A config_dump of at least ``target`` bytes (json, 1-space indent like Envoy)."""
    dump = json.loads(FIXTURE.read_text())
    listeners = dump["configs"][2]["dynamic_listeners"]
    template = listeners[1]["active_state"]["listener"]
    runtime = dump["configs"][0]["bootstrap"]["layered_runtime"]["layers"][1]["static_layer"]
    for index in range(LISTENERS):
        listener = _listener(template, index)
        state = copy.deepcopy(listeners[1]["active_state"])
        state["listener"] = listener
        listeners.append({"name": listener["name"], "active_state": state})
        runtime["envoy"]["resource_limits"]["listener"][listener["name"]] = {
            "connection_limit": 1000
        }
    clusters = dump["configs"][1]["dynamic_active_clusters"]
    routes = dump["configs"][4]["dynamic_route_configs"]
    cluster_template, route_template = clusters[0], routes[0]
    body = json.dumps(dump, indent=1).encode()
    index = 0
    while len(body) < target:
        for _ in range(500):
            cluster = copy.deepcopy(cluster_template)
            name = f"outbound|8080||svc-{index}.ns-{index % 97}.svc.cluster.local"
            cluster["cluster"]["name"] = name
            cluster["cluster"]["eds_cluster_config"]["service_name"] = name
            clusters.append(cluster)
            route = copy.deepcopy(route_template)
            route["route_config"]["name"] = f"http.{20000 + index}"
            route["route_config"]["virtual_hosts"][0]["routes"][0]["route"]["cluster"] = name
            routes.append(route)
            index += 1
        body = json.dumps(dump, indent=1).encode()
    return body


def _child(mode: str, path: Path) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(path)],
        capture_output=True, text=True, timeout=300, check=True, cwd=ROOT,
    )  # fmt: skip
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="gameday-envoy-bench-") as tmp:
        path = Path(tmp) / "config_dump.json"
        path.write_bytes(build_dump(TARGET_BYTES))
        size_mb = path.stat().st_size / 2**20
        audits, anchors = [], []
        for _ in range(RUNS):  # interleaved: machine noise hits both alike
            audits.append(_child("audit", path))
            anchors.append(_child("anchor", path)["seconds"])
        memory = _child("memory", path)
    times = [a["seconds"] for a in audits]
    audit_s = statistics.median(times)
    anchor_s = statistics.median(anchors)
    peak_mb = memory["peak_bytes"] / 2**20
    print(f"dump: {size_mb:.1f} MiB, {LISTENERS + 2} dynamic listeners "
          f"({CHAINS_PER_LISTENER} filter chains each), {audits[0]['checks']} checks")  # fmt: skip
    print(f"audit wall time: median {audit_s:.3f} s of {RUNS} fresh runs "
          f"(min {min(times):.3f}, max {max(times):.3f})")  # fmt: skip
    print(f"anchor json.loads of the same file: median {anchor_s:.3f} s "
          f"-> audit / parse = {audit_s / anchor_s:.2f}x")  # fmt: skip
    print(f"peak Python memory during the audit: {peak_mb:.1f} MiB = "
          f"{peak_mb / size_mb:.1f}x the file (goal < 10x); time goal < 2 s: "
          f"{'met' if audit_s < 2 else 'NOT met'}")  # fmt: skip
    print(f"envoy audit_20mb_s={audit_s:.3f} peak_mb={peak_mb:.1f}")


if __name__ == "__main__":
    main()
