"""experiments/envoy-edge-audit.json: valid, and a gate that holds or deviates."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support.envoy_dumps import COMPLIANT, DEFAULTS, AdminServer

EXPERIMENT = Path(__file__).parents[2] / "experiments" / "envoy-edge-audit.json"
Gameday = Callable[..., subprocess.CompletedProcess[str]]


def test_experiment_is_valid(gameday: Gameday) -> None:
    result = gameday("validate", str(EXPERIMENT))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("dump", "exit_code"), [(COMPLIANT, 0), (DEFAULTS, 1)])
def test_gate_holds_on_a_compliant_gateway_and_deviates_on_defaults(
    gameday: Gameday,
    admin_server: AdminServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    dump: Path,
    exit_code: int,
) -> None:
    admin_server.routes["/config_dump"] = (200, dump.read_bytes())
    monkeypatch.setenv("ENVOY_SOURCE", admin_server.url)
    journal = tmp_path / "journal.json"
    result = gameday("run", "--journal", str(journal), str(EXPERIMENT))
    assert result.returncode == exit_code, result.stdout + result.stderr
    probe = json.loads(journal.read_text())["steady_states"]["before"]["probes"][0]
    assert probe["output"]["passed"] is (exit_code == 0)
    assert probe["output"]["source"] == f"{admin_server.url}/config_dump"
