"""Benchmark: audit ~20 MB and ~100 MB Envoy /config_dumps (many listeners, clusters, routes).

Run on its own: ``.venv/bin/python benchmarks/envoy.py``.

Builds each dump from the compliant test fixture (an Istio ingress gateway):
122 dynamic listeners with 4 SNI filter chains each, then EDS clusters and
route configurations until the size is reached (about 40 % clusters, 50 %
routes, as in a real gateway's dump; each filter chain's RDS route config is
there, so the route rules read routes), written with Envoy's 1-space indent.
Each measurement runs in a fresh interpreter (no warm caches):

* audit: ``edge_config_audit(source=<file>)`` (profile envoy-edge) wall time,
  median of 5 runs (20 MB) and 3 runs (100 MB);
* anchor: ``json.loads`` of the same bytes, interleaved with the audits: what
  any audit that parses the whole dump pays before checking anything;
* memory: the audit process's peak RSS (``VmHWM``: interpreter, imports, the
  dump's bytes, everything), and tracemalloc's peak of Python allocations;
* CPU seconds beside wall time: on a loaded 2-core machine wall time swings,
  CPU time much less.

Goals (issue 16): the 100 MB dump in under 5 s and under 400 MB peak. Last line:
``envoy audit_20mb_s=<median> audit_100mb_s=<median> peak_mb=<peak RSS MiB, 100 MB dump>``.
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
LISTENERS = 120
CHAINS_PER_LISTENER = 4
SIZES = ((20, 5), (100, 3))  # (MiB, runs)

CHILD = """
import json, sys, time, tracemalloc
mode, path = sys.argv[1], sys.argv[2]
from chaos_ext.envoy.probes import edge_config_audit
if mode == "memory":
    tracemalloc.start()
started, cpu = time.perf_counter(), time.process_time()
if mode == "anchor":
    with open(path, "rb") as f:
        json.loads(f.read())
    result = {}
else:
    report = edge_config_audit(source=path)
    result = {"checks": report["summary"]["checks"], "passed": report["passed"]}
result["seconds"] = time.perf_counter() - started
result["cpu_seconds"] = time.process_time() - cpu
# VmHWM: this process's peak RSS (ru_maxrss would also count the parent's size at fork)
with open("/proc/self/status") as f:
    hwm = next(line for line in f if line.startswith("VmHWM:"))
result["rss_mib"] = int(hwm.split()[1]) / 1024
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


def _base() -> dict[str, Any]:
    dump: dict[str, Any] = json.loads(FIXTURE.read_text())
    listeners = dump["configs"][2]["dynamic_listeners"]
    template = listeners[1]["active_state"]["listener"]
    runtime = dump["configs"][0]["bootstrap"]["layered_runtime"]["layers"][1]["static_layer"]
    routes = dump["configs"][4]["dynamic_route_configs"]
    for index in range(LISTENERS):
        listener = _listener(template, index)
        for chain in listener["filter_chains"]:  # each chain's route config, so routes are read
            route = copy.deepcopy(routes[1])
            route["route_config"]["name"] = chain["filters"][0]["typed_config"]["rds"][
                "route_config_name"
            ]
            routes.append(route)
        state = copy.deepcopy(listeners[1]["active_state"])
        state["listener"] = listener
        listeners.append({"name": listener["name"], "active_state": state})
        limits = runtime["envoy"]["resource_limits"]["listener"]
        limits[listener["name"]] = {"connection_limit": 1000}
    return dump


def _pair(dump: dict[str, Any], index: int) -> tuple[dict[str, Any], dict[str, Any]]:
    cluster = copy.deepcopy(dump["configs"][1]["dynamic_active_clusters"][0])
    name = f"outbound|8080||svc-{index}.ns-{index % 97}.svc.cluster.local"
    cluster["cluster"]["name"] = name
    cluster["cluster"]["eds_cluster_config"]["service_name"] = name
    route = copy.deepcopy(dump["configs"][4]["dynamic_route_configs"][0])
    route["route_config"]["name"] = f"http.{20000 + index}"
    route["route_config"]["virtual_hosts"][0]["routes"][0]["route"]["cluster"] = name
    return cluster, route


def build_dump(target: int) -> bytes:
    """A config_dump of at least ``target`` bytes (JSON, 1-space indent like Envoy's)."""
    dump = _base()
    base_size = len(json.dumps(dump, indent=1))
    cluster, route = _pair(dump, 0)
    pair_size = len(json.dumps(cluster, indent=1)) + len(json.dumps(route, indent=1)) + 40
    count = 0
    while True:
        wanted = max(1, int((target - base_size) / pair_size * 1.02))
        for index in range(count, wanted):
            cluster, route = _pair(dump, index)
            dump["configs"][1]["dynamic_active_clusters"].append(cluster)
            dump["configs"][4]["dynamic_route_configs"].append(route)
        count = wanted
        body = json.dumps(dump, indent=1).encode()
        if len(body) >= target:
            return body
        base_size += target - len(body)  # short: grow the estimate and add the rest


def _child(mode: str, path: Path) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
        cwd=ROOT,
    )
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


def _measure(size_mib: int, runs: int, tmp: Path) -> dict[str, Any]:
    path = tmp / f"config_dump_{size_mib}mb.json"
    path.write_bytes(build_dump(size_mib * 1024 * 1024))
    audits, anchors = [], []
    for _ in range(runs):  # interleaved: machine noise hits both alike
        audits.append(_child("audit", path))
        anchors.append(_child("anchor", path))
    memory = _child("memory", path)
    times = [a["seconds"] for a in audits]
    return {
        "file_mib": path.stat().st_size / 2**20,
        "checks": audits[0]["checks"],
        "audit_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "cpu_s": statistics.median(a["cpu_seconds"] for a in audits),
        "anchor_s": statistics.median(a["seconds"] for a in anchors),
        "anchor_rss": max(a["rss_mib"] for a in anchors),
        "rss_mib": max(a["rss_mib"] for a in audits),
        "traced_mib": memory["peak_bytes"] / 2**20,
    }


def main() -> None:
    results = {}
    with tempfile.TemporaryDirectory(prefix="gameday-envoy-bench-") as tmp:
        for size, runs in SIZES:
            results[size] = r = _measure(size, runs, Path(tmp))
            print(
                f"{r['file_mib']:.1f} MiB dump, {LISTENERS + 2} listeners x "
                f"{CHAINS_PER_LISTENER} chains, {r['checks']} checks: audit median "
                f"{r['audit_s']:.3f} s of {runs} fresh runs (min {r['min_s']:.3f}, max "
                f"{r['max_s']:.3f}; CPU {r['cpu_s']:.3f} s); "
                f"anchor json.loads {r['anchor_s']:.3f} s "
                f"(audit/parse = {r['audit_s'] / r['anchor_s']:.2f}x); peak RSS "
                f"{r['rss_mib']:.0f} MiB (json.loads alone: {r['anchor_rss']:.0f} MiB), "
                f"tracemalloc peak {r['traced_mib']:.0f} MiB",
                flush=True,
            )
    big = results[100]
    print(
        f"goal for 100 MB: < 5 s ({'met' if big['audit_s'] < 5 else 'NOT met'}), "
        f"< 400 MB peak ({'met' if big['rss_mib'] < 400 else 'NOT met'})"
    )
    print(
        f"envoy audit_20mb_s={results[20]['audit_s']:.3f} "
        f"audit_100mb_s={big['audit_s']:.3f} peak_mb={big['rss_mib']:.0f}"
    )


if __name__ == "__main__":
    main()
