"""experiments/incidents/: each replay validates as it is, with the sandbox's short ramp,
and against a cluster's var-file; a cluster's load beyond the load's cap is refused."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support.harness import ROOT

INCIDENTS = sorted((ROOT / "experiments" / "incidents").glob("*.json"))
VARS = ROOT / "experiments" / "incidents" / "vars"
Gameday = Callable[..., subprocess.CompletedProcess[str]]


def test_there_is_one_experiment_per_incident() -> None:
    assert [p.stem for p in INCIDENTS] == [
        "01-eks-load-test",
        "02-nodelocal-dns-stall",
        "03-app-db-latency",
    ]


@pytest.mark.parametrize("experiment", INCIDENTS, ids=lambda p: p.stem)
@pytest.mark.parametrize("var_file", [None, "short-eks.json", "cluster.example.yaml"])
def test_each_incident_validates(experiment: Path, var_file: str | None, gameday: Gameday) -> None:
    options = ["--var-file", str(VARS / var_file)] if var_file else []
    done = gameday("validate", *options, str(experiment), timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"valid: {experiment}" in done.stdout + done.stderr


@pytest.mark.parametrize("experiment", INCIDENTS, ids=lambda p: p.stem)
def test_each_incident_ramps_load_with_causes_and_classifies_them(experiment: Path) -> None:
    data = json.loads(experiment.read_text())
    funcs = [a["provider"]["func"] for a in data["method"]]
    load = next(a for a in data["method"] if a["provider"]["func"] == "drive_http_load")
    assert "ramp" in load["provider"]["arguments"]
    assert load["provider"]["arguments"]["cause_header"] == "${cause_header}"
    assert "error_onset" in funcs
    # every fault of the method has its rollback
    undo = {
        "saturate_dnsmasq_tcp": "release_dnsmasq_tcp",
        "limit_dns_rate": "remove_dns_rate_limit",
        "exhaust_connections": "release_connections",
        "add_latency": "remove_latency",
        "drive_http_load": "stop_http_load",
    }
    rollbacks = {a["provider"]["func"] for a in data["rollbacks"]}
    assert {undo[f] for f in funcs if f in undo} <= rollbacks


def test_a_cluster_ramp_above_the_load_cap_is_refused(gameday: Gameday, tmp_path: Path) -> None:
    too_fast = tmp_path / "too-fast.json"
    too_fast.write_text(json.dumps({"configuration": {"ramp_to": 5000, "max_rate": 100}}))
    done = gameday("validate", "--var-file", str(too_fast), str(INCIDENTS[0]), timeout=180)
    assert done.returncode == 3
    assert "peak 5000 req/s is above the cap 100" in done.stdout + done.stderr
