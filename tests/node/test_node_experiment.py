"""experiments/node-drain.json run end to end by `gameday run`.

The emulated cluster (this process) and a real Prometheus scraping error-free
traffic stand in for the platform, and a real HTTP server on loopback for the
service the synthetic load drives; the experiment file is the shipped one, only
its environment-driven configuration points at them.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support import k8s_objects as o
from support.k8s_emulator import EmulatorHandle
from support.servers import http_target
from support.steady_traffic import steady_traffic

from chaos_ext._core.ledger import Ledger

EXPERIMENT = Path(__file__).resolve().parents[2] / "experiments" / "node-drain.json"


@pytest.mark.slow
def test_the_node_drain_experiment_holds_and_rolls_back(
    emulator: EmulatorHandle,
    ledger_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    nodes = [f"worker-{i}" for i in range(3)]
    emulator.put([o.node(n, {"role": "eat-workers"}) for n in nodes])
    emulator.put(o.deployment("shop", "api", replicas=4, nodes=nodes))
    emulator.put(o.pdb("shop", "api", match_labels={"app": "api"}, max_unavailable=1))
    emulator.put(
        o.hpa("shop", "api", target="api", min_replicas=2, max_replicas=8, current=4, desired=4)
    )
    with steady_traffic("api", history_s=8) as prometheus_url, http_target.start() as service:
        for key, value in {
            "PROMETHEUS_URL": prometheus_url,
            "ERROR_WINDOW_SECONDS": "5",
            "ERROR_STEP_SECONDS": "1",
            "READY_WITHIN_SECONDS": "30",
            "GAMEDAY_LOAD_URL": service.url,
            "GAMEDAY_LOAD_RATE": "50",
            "GAMEDAY_LOAD_SECONDS": "60",
        }.items():
            monkeypatch.setenv(key, value)
        result = gameday("run", "--journal", "journal.json", str(EXPERIMENT), timeout=240)
        served = service.stats()["requests"]
    assert result.returncode == 0, result.stdout + result.stderr
    journal = json.loads((tmp_path / "journal.json").read_text())
    assert journal["status"] == "completed" and journal["deviated"] is False
    by_name = {r["activity"]["name"]: r for r in journal["run"]}
    drain = by_name["drain-worker-nodes"]["output"]
    assert drain["evicted"] == sum(1 for p in drain["nodes"][0]["pods"]) >= 1
    rollbacks = {r["activity"]["name"]: r["output"] for r in journal["rollbacks"]}
    assert rollbacks["uncordon-the-drained-nodes"]["undone"] == 1
    assert rollbacks["stop-the-synthetic-load"]["undone"] == 1  # the load was stopped...
    (stopped,) = rollbacks["stop-the-synthetic-load"]["results"].values()
    assert stopped["ok"] > 0  # ... after it really ran
    assert stopped["error_ratio"] == 0
    assert served >= stopped["ok"]  # ... against the real server (which also saw the baseline)
    after = {p["activity"]["name"]: p for p in journal["steady_states"]["after"]["probes"]}
    during = after["synthetic-load-errors-below-1-percent"]["output"]
    assert during["scheduled"] > 0 and during["error_ratio"] == 0
    assert all(p["tolerance_met"] for p in after.values())
    assert after["all-pods-ready-again"]["output"] == 1.0
    assert after["hpa-not-stuck"]["output"]["stuck"] is False
    assert not [n for n in emulator.items("Node") if n["spec"].get("unschedulable")]
    assert Ledger(ledger_path).open_entries() == []
