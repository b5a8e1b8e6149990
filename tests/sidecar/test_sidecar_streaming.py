"""Drift over several pages of pods: streamed, and the garbage collector is never paused."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support import istio_fixtures as istio
from support import k8s_objects as o
from support.k8s_emulator import EmulatorHandle

from chaos_ext.sidecar.probes import sidecar_drift


@pytest.fixture
def gc_watch() -> Iterator[Callable[[], list[bool]]]:
    """Samples ``gc.isenabled()`` from another thread while the test runs."""
    seen: list[bool] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.001):
            seen.append(gc.isenabled())

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    yield lambda: seen
    stop.set()
    thread.join(timeout=5)


def test_a_listing_of_several_pages_never_pauses_the_collector(
    emulator: EmulatorHandle, gc_watch: Callable[[], list[bool]]
) -> None:
    nodes = ["worker-0", "worker-1"]
    old, new = istio.injector_values(tag="1.22.3"), istio.injector_values(tag="1.23.1")
    emulator.put([o.node(n, {"role": "mesh"}) for n in nodes])
    emulator.put(istio.injector_configmap(new))
    for i in range(110):  # 550 pods: two pages of 500
        values = old if i % 2 else new
        emulator.put(
            istio.mesh_deployment("team", f"svc-{i}", replicas=5, nodes=nodes, values=values)
        )
    result: dict[str, Any] = sidecar_drift()
    assert (result["pods"], result["drifted_pods"], result["drifted_workloads"]) == (550, 275, 55)
    assert gc_watch() and all(gc_watch())
