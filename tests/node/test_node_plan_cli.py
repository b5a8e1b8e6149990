"""`gameday plan experiments/node-drain.json`: the shipped experiment planned, nothing touched.

The real CLI in a subprocess, against the API emulator (this process) and a
real HTTP server for the synthetic load; the configuration is resolved as
`gameday run` resolves it (environment, ${...}).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support import k8s_objects as o
from support.harness import wait_for
from support.k8s_cluster import KINDS, is_ready
from support.k8s_emulator import EmulatorHandle
from support.servers import http_target

EXPERIMENT = Path(__file__).resolve().parents[2] / "experiments" / "node-drain.json"


def _objects(emulator: EmulatorHandle) -> str:
    return json.dumps({kind: emulator.items(kind) for kind in sorted(KINDS)}, sort_keys=True)


def _api_behind_a_budget_that_forbids_eviction(emulator: EmulatorHandle, pool: list[str]) -> None:
    """3 Ready api pods on the pool and a PDB with minAvailable 3: no eviction allowed."""
    emulator.put(o.deployment("shop", "api", replicas=3, nodes=pool))
    emulator.put(o.pdb("shop", "api-budget", match_labels={"app": "api"}, min_available=3))
    wait_for(
        lambda: len(pods := emulator.items("Pod", "shop")) == 3 and all(map(is_ready, pods)),
        10,
        "the api pods Ready",
    )


def test_plan_names_the_blocking_budget_before_anything_is_cordoned(
    emulator: EmulatorHandle,
    pool: list[str],
    ledger_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    _api_behind_a_budget_that_forbids_eviction(emulator, pool)
    before = _objects(emulator)
    with http_target.start() as service:
        monkeypatch.setenv("GAMEDAY_LOAD_URL", service.url)
        result = gameday("plan", "--json", "plan.json", str(EXPERIMENT), timeout=120)
        served = service.stats()["requests"]

    out = result.stdout + result.stderr
    assert result.returncode == 1, out  # a preflight failed: the budget forbids the eviction
    assert "blocked by PodDisruptionBudget shop/api-budget" in " ".join(out.split()), out
    assert _objects(emulator) == before  # nothing cordoned or evicted
    assert served == 0  # the load's target was not sent a request
    assert not ledger_path.exists()  # the ledger was never even opened for writing
    (planned,) = json.loads((tmp_path / "plan.json").read_text())["plans"]
    rows = {row["activity"]: row for row in planned["actions"]}
    assert set(rows) == {"synthetic-load-on-the-service", "drain-worker-nodes"}
    load = rows["synthetic-load-on-the-service"]["plan"]
    assert load["blast_radius"]["peak_rate"] == 20  # ${load_rate}: the env default, resolved
    assert load["blast_radius"]["duration_seconds"] == 600
    drain = rows["drain-worker-nodes"]
    assert drain["status"] == "preflight failed"
    (node,) = drain["plan"]["blast_radius"]["nodes"]
    assert node["name"] in pool
    (eviction,) = drain["plan"]["blast_radius"]["evictions"]
    assert eviction["verdict"] == "blocked" and eviction["blocking"] == ["shop/api-budget"]


def test_an_action_without_a_plan_is_listed(
    tmp_path: Path, gameday: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    experiment = {
        "title": "a remedy has no plan",
        "description": "x",
        "method": [
            {
                "type": "action",
                "name": "restart-drifted",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.sidecar.actions",
                    "func": "rollout_drifted_workloads",
                    "arguments": {},
                },
            }
        ],
    }
    (tmp_path / "x.json").write_text(json.dumps(experiment))
    result = gameday("plan", "x.json", "--json", "out.json")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "no plan: chaos_ext.sidecar.actions.rollout_drifted_workloads" in result.stderr
    (planned,) = json.loads((tmp_path / "out.json").read_text())["plans"]
    assert planned["actions"][0]["status"] == "no plan"


def test_run_dry_run_is_plan_the_same_table_json_and_exit_code(
    emulator: EmulatorHandle,
    pool: list[str],
    ledger_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """`gameday run --dry-run` is `gameday plan`: nothing drained, no journal, no ledger.

    The shipped drain with pick=first: with pick=random each plan draws its own node."""
    drain = json.loads(EXPERIMENT.read_text())
    (step,) = [s for s in drain["method"] if s.get("name") == "drain-worker-nodes"]
    step["provider"]["arguments"]["pick"] = "first"
    (tmp_path / "drain.json").write_text(json.dumps(drain))
    _api_behind_a_budget_that_forbids_eviction(emulator, pool)
    before = _objects(emulator)
    with http_target.start() as service:
        monkeypatch.setenv("GAMEDAY_LOAD_URL", service.url)
        planned = gameday("plan", "--json", "plan.json", "drain.json", timeout=120)
        dry = gameday("run", "--dry-run", "--json", "dry.json", "drain.json", timeout=120)
        served = service.stats()["requests"]

    assert planned.returncode == dry.returncode == 1, dry.stdout + dry.stderr  # budget blocks
    assert dry.stdout == planned.stdout
    assert dry.stderr == planned.stderr  # the same table, line for line
    assert "blocked by PodDisruptionBudget shop/api-budget" in " ".join(dry.stderr.split())
    assert (tmp_path / "dry.json").read_bytes() == (tmp_path / "plan.json").read_bytes()
    (plan,) = json.loads((tmp_path / "dry.json").read_text())["plans"]
    (node,) = plan["actions"][1]["plan"]["blast_radius"]["nodes"]
    assert node["name"] == pool[0]  # pick=first: the same node both times, a live one
    assert _objects(emulator) == before  # nothing cordoned or evicted
    assert served == 0
    assert not ledger_path.exists()  # neither opened the ledger
    assert not list(tmp_path.glob("journal-*.json"))  # and the dry run wrote no journal


def test_run_dry_run_refuses_what_the_run_refuses_and_json_without_it(
    tmp_path: Path, gameday: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    bad_settle = gameday("run", "--dry-run", "--settle", "-5", str(EXPERIMENT))
    assert bad_settle.returncode == 3, bad_settle.stdout + bad_settle.stderr
    assert "settle" in bad_settle.stdout + bad_settle.stderr
    no_dry = gameday("run", "--json", "x.json", str(EXPERIMENT))
    assert no_dry.returncode == 3, no_dry.stdout + no_dry.stderr
    assert "--json writes the plans of --dry-run" in no_dry.stdout + no_dry.stderr
    assert not (tmp_path / "x.json").exists()
