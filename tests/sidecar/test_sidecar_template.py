"""change_sidecar_template and its undo against the emulator: byte-for-byte restore."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from support.harness import cli_env, gameday_argv, wait_for
from support.k8s_emulator import EmulatorHandle

from chaos_ext._core.k8s import api_client
from chaos_ext._core.ledger import Ledger, set_current_run_id
from chaos_ext.errors import InvalidArgument
from chaos_ext.faults.actions import rollback_faults
from chaos_ext.sidecar.actions import change_sidecar_template, restore_sidecar_template

CM_PATH = "/api/v1/namespaces/istio-system/configmaps/istio-sidecar-injector"


def _raw_data(emulator: EmulatorHandle) -> dict[str, str]:
    """The ConfigMap's data exactly as the API serves it (bytes on the wire, decoded)."""
    with urllib.request.urlopen(emulator.url.rstrip("/") + CM_PATH, timeout=10) as answer:  # noqa: S310 - loopback
        data: dict[str, str] = json.loads(answer.read())["data"]
    return data


@pytest.mark.rolls_back("sidecar-template")
@pytest.mark.undoes("sidecar-template")
def test_change_then_undo_restores_the_configmap_byte_for_byte(
    emulator: EmulatorHandle, mesh: dict[str, Any], ledger_path: Path
) -> None:
    before = _raw_data(emulator)
    result = change_sidecar_template(
        values_patch={
            "global": {"tag": "1.23.1", "proxy": {"resources": {"requests": {"cpu": "250m"}}}}
        }
    )
    assert result["changed_keys"] == ["values"]
    (entry,) = Ledger(ledger_path).open_entries()
    assert result["ledger_id"] == entry.id
    during = _raw_data(emulator)
    values = json.loads(during["values"])
    assert values["global"]["tag"] == "1.23.1"
    assert values["global"]["proxy"]["resources"]["requests"] == {"cpu": "250m", "memory": "128Mi"}
    assert during["config"] == before["config"]
    assert entry.recipe["previous"]["values"] == before["values"]
    # the previous text is in the cluster too, in the backup ConfigMap the recipe names
    backup = emulator.get("ConfigMap", "istio-system", f"gameday-backup-{entry.id}")
    assert backup is not None and entry.recipe["backup"] == f"gameday-backup-{entry.id}"
    assert result["backup"] == f"istio-system/gameday-backup-{entry.id}"
    assert backup["metadata"]["labels"]["chaos-ext.gameday/backup"] == "sidecar-template"
    assert backup["metadata"]["annotations"] == {
        "chaos-ext.gameday/ledger-id": entry.id,
        "chaos-ext.gameday/backs-up": "istio-system/istio-sidecar-injector",
    }
    kept = json.loads(backup["data"]["recipe.json"])
    assert kept["previous"] == entry.recipe["previous"]
    assert kept["applied_sha256"] == entry.recipe["applied_sha256"]

    undone = restore_sidecar_template()
    assert undone["undone"] == 1 and "restored values" in undone["faults"][0]["note"]
    assert undone["faults"][0]["ledger_id"] == entry.id and undone["left_alone"] == []
    after = _raw_data(emulator)
    assert after == before
    assert {k: v.encode() for k, v in after.items()} == {k: v.encode() for k, v in before.items()}
    assert Ledger(ledger_path).open_entries() == []
    assert "deleted the backup ConfigMap" in undone["faults"][0]["note"]
    assert emulator.get("ConfigMap", "istio-system", f"gameday-backup-{entry.id}") is None
    again = Ledger(ledger_path).record(  # an undo finding the backup already gone: still fine
        kind=entry.kind,
        target=entry.target,
        recipe=entry.recipe,
        module=entry.module,
        identity=entry.identity,
    )
    assert "already has its previous text" in restore_sidecar_template()["faults"][0]["note"]
    assert Ledger(ledger_path).get(again.id).state == "closed"  # type: ignore[union-attr]


def test_whole_keys_new_keys_and_a_later_edit(
    emulator: EmulatorHandle, mesh: dict[str, Any], ledger_path: Path
) -> None:
    before = _raw_data(emulator)
    new_config = before["config"].replace("policy: enabled", "policy: disabled")
    change_sidecar_template(data={"config": new_config, "gameday-note": "injected by a game day\n"})
    assert _raw_data(emulator)["gameday-note"] == "injected by a game day\n"
    # someone edits the ConfigMap meanwhile: the undo still restores, and says so
    core = client.CoreV1Api(api_client())
    core.patch_namespaced_config_map(
        "istio-sidecar-injector",
        "istio-system",
        {"data": {"config": "edited"}},
        _request_timeout=10,
    )
    undone = rollback_faults()
    assert "changed again since by someone else: config" in undone["faults"][0]["note"]
    assert _raw_data(emulator) == before  # the new key is removed too


def test_a_change_that_changes_nothing_is_refused(
    emulator: EmulatorHandle, mesh: dict[str, Any], ledger_path: Path
) -> None:
    with pytest.raises(InvalidArgument, match="nothing to do"):
        change_sidecar_template(values_patch={"global": {"tag": "1.22.3"}})
    assert Ledger(ledger_path).history() == []


def test_sigkill_after_the_change_then_gameday_rollback_restores(
    emulator: EmulatorHandle,
    mesh: dict[str, Any],
    ledger_path: Path,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    before = _raw_data(emulator)
    experiment = write_experiment(
        {
            "title": "new proxy tag",
            "description": "killed after the change",
            "method": [
                {
                    "type": "action",
                    "name": "bump-proxy-tag",
                    "provider": {
                        "type": "python",
                        "module": "chaos_ext.sidecar.actions",
                        "func": "change_sidecar_template",
                        "arguments": {"values_patch": {"global": {"tag": "1.23.1"}}},
                    },
                },
                {
                    "type": "probe",
                    "name": "hold",
                    "provider": {
                        "type": "process",
                        "path": "sleep",
                        "arguments": "60",
                        "timeout": 90,
                    },
                },
            ],
        }
    )
    runner = subprocess.Popen(
        gameday_argv("run", "--journal", str(tmp_path / "j.json"), str(experiment)),
        env=cli_env(ledger_path),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: _raw_data(emulator) != before, 60, "the template change")
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)
    assert json.loads(_raw_data(emulator)["values"])["global"]["tag"] == "1.23.1"
    (entry,) = Ledger(ledger_path).open_entries()
    assert emulator.get("ConfigMap", "istio-system", entry.recipe["backup"]) is not None
    result = gameday("rollback")
    assert result.returncode == 0, result.stderr
    assert _raw_data(emulator) == before
    assert emulator.get("ConfigMap", "istio-system", entry.recipe["backup"]) is None


def test_restore_leaves_a_live_runs_change_alone_and_takes_a_dead_runs_on_request(
    emulator: EmulatorHandle, mesh: dict[str, Any], ledger_path: Path
) -> None:
    """The rollback scope: this run's by default, dead runs' when asked, never a live run's."""
    before = _raw_data(emulator)
    script = (
        "from chaos_ext.sidecar.actions import change_sidecar_template as c; "
        "print(c(data={'gameday-dead': 'left by a killed run'})['ledger_id'])"
    )
    dead = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    ).stdout.strip()  # that process has exited: its run is dead, its change still open
    set_current_run_id("another-live-run")  # this process, alive, under another run id
    try:
        live = change_sidecar_template(data={"gameday-live": "a live run's"})["ledger_id"]
    finally:
        set_current_run_id(None)
    undone = restore_sidecar_template()
    assert undone["undone"] == 0
    assert {a["ledger_id"]: a["reason"] for a in undone["left_alone"]} == {
        dead: "its runner is dead: pass include_dead_runs=true",
        live: "its runner is alive: that run undoes it itself",
    }
    undone = restore_sidecar_template(include_dead_runs=True)
    assert [f["ledger_id"] for f in undone["faults"]] == [dead]
    assert [a["ledger_id"] for a in undone["left_alone"]] == [live]
    assert "gameday-dead" not in _raw_data(emulator) and "gameday-live" in _raw_data(emulator)
    set_current_run_id("another-live-run")
    try:
        assert restore_sidecar_template()["undone"] == 1
    finally:
        set_current_run_id(None)
    assert _raw_data(emulator) == before
