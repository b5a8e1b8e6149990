"""Benchmark: sidecar drift over 10,000 and 50,000 pods, and drain_nodes vs ``kubectl drain``.

Both run against the Kubernetes API emulator (kmock + tests/support) in its
own process, over HTTP, with the real ``kubernetes`` client (and the real
kubectl), so listing, JSON and HTTP costs are part of every number.

1. Drift: 1,000 Deployments x 10 Istio-injected pods (half of them injected
   under the previous proxy tag) plus their ReplicaSets. ``sidecar_drift()``
   wall time, listing included (500 per page), median of several runs. For
   scale, the same pod listing through the client's model classes (its
   default) is timed once. Then the same at 50,000 pods (5,000 Deployments),
   with the peak memory: this process's VmHWM over the runs (reset first with
   ``/proc/self/clear_refs``), printed beside its RSS before them.
2. Drain: one node carrying 200 pods of 20 Deployments, each with a
   PodDisruptionBudget ``maxUnavailable: 25%``; replacement pods turn Ready
   0.3 s after they are scheduled. ``drain_nodes`` and ``kubectl drain`` run
   alternately, each on a fresh emulator, median of the runs. A second,
   budget-free scenario shows raw eviction throughput. kubectl's requests are
   counted from its ``-v=6`` log: its pace is set by client-go's client-side
   rate limiter, which the output shows.

Last line: ``k8s drift_10k_s=<median s> drift_50k_s=<median s> drift_50k_peak_mib=<MiB>
drain_speedup=<kubectl median / drain_nodes median>`` (the budgeted scenario; goals:
10k under 2 s, 50k under 5 s). ``--drift-only`` skips the drain scenarios.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _peers import require

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from kubernetes import client  # noqa: E402
from support import istio_fixtures as istio  # noqa: E402
from support import k8s_objects as o  # noqa: E402
from support.k8s_emulator import start_process  # noqa: E402

from chaos_ext._core.k8s import api_client  # noqa: E402
from chaos_ext.node.actions import drain_nodes  # noqa: E402
from chaos_ext.sidecar.probes import sidecar_drift  # noqa: E402

DRIFT_RUNS = 5
DRIFT_50K_RUNS = 5
DRAIN_RUNS = 3
NODES = [f"worker-{i}" for i in range(12)]
_REQUEST_LINE = re.compile(r'(?:"Response" verb="|round_trippers\.go:\d+\] )(?:GET|POST|PATCH)\b')
KUBECTL: list[tuple[int, int]] = []  # per kubectl run: HTTP requests, throttling log lines


def _mesh_seed(path: Path, deployments: int) -> int:
    """``deployments`` x 10 Istio-injected pods (every other Deployment under the previous
    proxy tag) and their ReplicaSets, written as one JSON list object by object (the
    seed is never held whole); returns how many pods are drifted."""
    old, new = istio.injector_values(tag="1.22.3"), istio.injector_values(tag="1.23.1")
    started = datetime.now(UTC) - timedelta(days=2)
    drifted = 0
    with path.open("w") as out:
        out.write("[")
        for obj in [*(o.node(n, {"role": "mesh"}) for n in NODES), istio.injector_configmap(new)]:
            out.write(json.dumps(obj) + ",\n")
        for i in range(deployments):
            values = old if i % 2 == 0 else new
            drifted += 10 if values is old else 0
            ns, name = f"team-{i % 40}", f"svc-{i}"
            objs = istio.mesh_deployment(
                ns, name, replicas=10, nodes=NODES, values=values, started=started
            )
            out.write(",\n".join(json.dumps(obj) for obj in objs))
            out.write(",\n" if i < deployments - 1 else "]")
    return drifted


def _memory_kib(field: str) -> int:
    """``VmRSS`` / ``VmHWM`` (the peak since the last reset) of this process, in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak_memory() -> None:
    """Start ``VmHWM`` again from the current RSS (Linux >= 4.0: clear_refs 5)."""
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")


def bench_drift(tmp: Path, deployments: int, runs: int) -> tuple[float, float]:
    """Median seconds of ``sidecar_drift`` over ``deployments`` x 10 pods, and the peak
    RSS of this process during the runs (MiB: the interpreter, the kubernetes client and
    the probe's own memory)."""
    pods = deployments * 10
    seed = tmp / f"mesh-{pods}.json"
    t0 = time.monotonic()
    expected = _mesh_seed(seed, deployments)
    size = seed.stat().st_size >> 20
    print(f"drift: seeded {pods:,} pods in {time.monotonic() - t0:.1f} s ({size} MiB of JSON)")
    with start_process(tmp / f"kubeconfig-mesh-{pods}", seed, timeout=900) as emulator:
        seed.unlink()
        os.environ["KUBECONFIG"] = str(emulator.kubeconfig)
        times, cpu = [], []
        _reset_peak_memory()
        before = _memory_kib("VmRSS")
        for _ in range(runs):
            t0, c0 = time.monotonic(), time.process_time()
            result = sidecar_drift()
            times.append(time.monotonic() - t0)
            cpu.append(time.process_time() - c0)
            assert result["pods"] == pods, result["pods"]
            assert result["drifted_pods"] == expected, result["drifted_pods"]
            assert result["drifted_workloads"] == deployments // 2, result["drifted_workloads"]
            del result
        peak_mib = _memory_kib("VmHWM") / 1024
        models_s = _models_listing_s() if pods == 10_000 else None
    median = statistics.median(times)
    runs_text = ", ".join(f"{t:.2f}" for t in times)
    print(
        f"drift: sidecar_drift over {pods:,} pods / {deployments:,} workloads: runs {runs_text} s"
        f" (the first with the emulator's serialisation cache cold), median {median:.2f} s"
        f" (this process's CPU: median {statistics.median(cpu):.2f} s; the rest is the emulator"
        f" and the machine's load: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores),"
        f" peak RSS {peak_mib:.0f} MiB ({before / 1024:.0f} MiB before the runs)"
    )
    if models_s is not None:
        print(
            f"drift: for scale, listing the same {pods} pods through the client's model classes"
            f" took {models_s:.2f} s ({models_s / median:.1f}x the whole drift check)"
        )
    return median, peak_mib


def _models_listing_s() -> float:
    """Seconds to list every pod through the client's model classes (its default)."""
    core = client.CoreV1Api(api_client())
    t0 = time.monotonic()
    token = None
    while True:
        kwargs = {"_continue": token} if token else {}
        page = core.list_pod_for_all_namespaces(limit=500, _request_timeout=60, **kwargs)
        token = page.metadata._continue
        if not token:
            return time.monotonic() - t0


def _drain_seed(path: Path, *, budgets: bool) -> None:
    nodes = [f"worker-{i}" for i in range(6)]
    objects: list[dict[str, Any]] = [o.node(n, {"role": "eat-workers"}) for n in nodes]
    objects += o.daemonset("kube-system", "kube-proxy", nodes=nodes)
    for i in range(20):
        objects += o.deployment("shop", f"svc-{i}", replicas=10, nodes=["worker-0"])
        if budgets:
            objects.append(
                o.pdb("shop", f"svc-{i}", match_labels={"app": f"svc-{i}"}, max_unavailable="25%")
            )
    path.write_text(json.dumps(objects))


def _drain_once(tmp: Path, tool: str, *, budgets: bool) -> float:
    seed = tmp / f"drain-{budgets}.json"
    if not seed.exists():
        _drain_seed(seed, budgets=budgets)
    kubeconfig = tmp / f"kubeconfig-{tool}"
    with start_process(kubeconfig, seed, ready_delay=0.3) as emulator:
        os.environ["KUBECONFIG"] = str(emulator.kubeconfig)
        t0 = time.monotonic()
        if tool == "drain_nodes":
            report = drain_nodes("role=eat-workers", count=1, pick="first", timeout_seconds=600)
            assert report["evicted"] == 200, report
        else:
            done = subprocess.run(
                [
                    "kubectl",
                    "--kubeconfig",
                    str(kubeconfig),
                    "drain",
                    "worker-0",
                    "--ignore-daemonsets",
                    "--delete-emptydir-data",
                    "--timeout=600s",
                    "-v=6",
                ],
                check=True,
                capture_output=True,
                text=True,
                timeout=700,
            )
            requests = len(re.findall(_REQUEST_LINE, done.stderr))
            KUBECTL.append((requests, done.stderr.count("due to client-side throttling")))
        took = time.monotonic() - t0
        core = client.CoreV1Api(api_client())
        left = core.list_pod_for_all_namespaces(
            field_selector="spec.nodeName=worker-0", _request_timeout=30
        ).items
        assert [p.metadata.name for p in left if p.metadata.name.startswith("svc-")] == []
    return took


def bench_drain(tmp: Path, *, budgets: bool, runs: int) -> float:
    times: dict[str, list[float]] = {"drain_nodes": [], "kubectl": []}
    for i in range(runs):
        order = ("drain_nodes", "kubectl") if i % 2 == 0 else ("kubectl", "drain_nodes")
        for tool in order:
            times[tool].append(_drain_once(tmp, tool, budgets=budgets))
    ours, theirs = statistics.median(times["drain_nodes"]), statistics.median(times["kubectl"])
    label = "with PDBs maxUnavailable=25%" if budgets else "without budgets"
    for tool, values in times.items():
        print(
            f"drain ({label}): {tool}: runs {', '.join(f'{t:.2f}' for t in values)} s,"
            f" median {statistics.median(values):.2f} s"
        )
    print(f"drain ({label}): kubectl / drain_nodes = {theirs / ours:.2f}")
    if KUBECTL:
        requests, throttled = max(KUBECTL)
        print(
            f"drain ({label}): kubectl made {requests} requests a run ({requests / theirs:.1f}/s)"
            f" and logged 'Waited for ... due to client-side throttling' {throttled} times:"
            " client-go's client-side rate limiter paces it; drain_nodes keeps `parallel`=8"
            " requests in flight, without a client-side limiter"
        )
        KUBECTL.clear()
    return theirs / ours


def main() -> None:
    require("k8s", "kubectl")
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--drift-only", action="store_true", help="skip the drain scenarios")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-k8s-") as tmp_name:
        tmp = Path(tmp_name)
        os.environ["GAMEDAY_LEDGER"] = str(tmp / "ledger.sqlite3")
        drift, _ = bench_drift(tmp, 1_000, DRIFT_RUNS)
        drift_50k, peak_50k = bench_drift(tmp, 5_000, DRIFT_50K_RUNS)
        speedup = None
        if not args.drift_only:
            bench_drain(tmp, budgets=False, runs=DRAIN_RUNS)
            speedup = bench_drain(tmp, budgets=True, runs=DRAIN_RUNS)
    drain = "n/a" if speedup is None else f"{speedup:.2f}"
    print(
        f"k8s drift_10k_s={drift:.2f} drift_50k_s={drift_50k:.2f} drift_50k_peak_mib={peak_50k:.0f}"
        f" drain_speedup={drain}"
    )


if __name__ == "__main__":
    main()
