"""experiments/sidecar-template-change.json run end to end by `gameday run`.

The emulated mesh (this process, with an Istio-like injector) and a real
Prometheus scraping error-free traffic stand in for the platform.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.k8s_emulator import EmulatorHandle
from support.steady_traffic import steady_traffic

from chaos_ext._core.ledger import Ledger
from chaos_ext.sidecar.probes import sidecar_drift

EXPERIMENT = Path(__file__).resolve().parents[2] / "experiments" / "sidecar-template-change.json"


@pytest.mark.slow
def test_the_sidecar_experiment_rolls_out_and_restores(
    emulator: EmulatorHandle,
    mesh: dict[str, Any],
    ledger_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    before = emulator.get("ConfigMap", "istio-system", "istio-sidecar-injector")
    with steady_traffic("api", history_s=8) as prometheus_url:
        for key, value in {
            "PROMETHEUS_URL": prometheus_url,
            "ERROR_WINDOW_SECONDS": "5",
            "ERROR_STEP_SECONDS": "1",
            "MESH_NAMESPACE": "shop",
        }.items():
            monkeypatch.setenv(key, value)
        result = gameday("run", "--journal", "journal.json", str(EXPERIMENT), timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    journal = json.loads((tmp_path / "journal.json").read_text())
    assert journal["deviated"] is False
    change, drift, rollout = (step["output"] for step in journal["run"])
    assert change["changed_keys"] == ["values"]
    assert drift["drifted_pods"] == 5 and drift["drifted_workloads"] == 2
    assert "resources.requests.cpu: 100m != 150m" in drift["drifted"][0]["differences"]
    assert sorted(r["name"] for r in rollout["restarted"]) == ["cart", "web"]
    after = journal["steady_states"]["after"]["probes"]
    assert [p["output"]["drifted_pods"] for p in after if "drift" in p["activity"]["name"]] == [0]
    # rollbacks: the ConfigMap is back byte for byte and the pods match it again
    current = emulator.get("ConfigMap", "istio-system", "istio-sidecar-injector")
    assert current is not None and before is not None and current["data"] == before["data"]
    assert journal["rollbacks"][1]["output"]["restarted"]
    assert sidecar_drift(include_namespaces=["shop"])["drifted_pods"] == 0
    assert Ledger(ledger_path).open_entries() == []
