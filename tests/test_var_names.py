"""`--var` names checked against the experiments; `--kubeconfig`/`--context` on run and plan.

chaoslib keeps only the `--var` keys an experiment's configuration declares: a typo
(`--var prometheus_ulr=...`) used to be "valid", and the run used the default URL.
The real CLI in a subprocess; the cluster is the Kubernetes API emulator over HTTP.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import k8s_objects as o
from support.k8s_emulator import EmulatorHandle, start

from chaos_ext._core.prometheus_api.alertsources import alertmanager_url
from chaos_ext._core.prometheus_api.client import settings_from
from chaos_ext._core.prometheus_api.promql_versions import promql_target
from chaos_ext._runner.windows import pushgateway_url
from chaos_ext.cli._admission import GAMEDAY_READS

Gameday = Callable[..., subprocess.CompletedProcess[str]]
EDGE = Path(__file__).resolve().parents[1] / "experiments" / "prometheus-edge-slo.json"


def _lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


@pytest.mark.parametrize("command", ["validate", "run", "plan"])
def test_a_misspelt_var_is_refused_naming_the_key_it_meant(
    command: str, gameday: Gameday, tmp_path: Path
) -> None:
    result = gameday(command, "--var", "prometheus_ulr=http://prometheus:9090", str(EDGE))
    assert result.returncode == 3, result.stdout + result.stderr
    (line,) = _lines(result)
    assert line.startswith("invalid: --var prometheus_ulr: no experiment given declares it")
    assert line.endswith("did you mean prometheus_url?"), line
    assert "declared: prometheus_timeout_seconds, prometheus_url, service_job;" in line
    assert not list(tmp_path.glob("journal*.json"))  # nothing ran


def test_a_var_without_a_value_is_one_clear_line(gameday: Gameday) -> None:
    result = gameday("validate", "--var", "prometheus_url", str(EDGE))
    assert result.returncode == 3
    (line,) = _lines(result)
    assert line.startswith("invalid: --var 'prometheus_url': expected NAME=VALUE"), line
    assert "unpack" not in line


def test_names_gameday_reads_itself_are_accepted_undeclared(
    gameday: Gameday, write_experiment: Callable[..., Path]
) -> None:
    bare = write_experiment({"title": "t", "description": "d", "method": []})
    values = {"prometheus_version": "2.42"}
    given = [
        f"--var={name}={values.get(name, 'http://127.0.0.1:9')}" for name in sorted(GAMEDAY_READS)
    ]
    result = gameday("validate", *given, str(bare))
    assert result.returncode == 0, result.stderr
    declared = write_experiment(
        {"title": "t", "description": "d", "method": [], "configuration": {"app_job": "api"}},
        "declared.json",
    )
    # a name one experiment of the command declares is fine for all of them
    assert gameday("validate", "--var", "app_job=web", str(bare), str(declared)).returncode == 0
    far = gameday("validate", "--var", "zzz=1", str(bare))
    assert far.returncode == 3 and "did you mean" not in far.stderr, far.stderr


class _Reads(dict[str, Any]):
    """A configuration that notes every key its reader looks at."""

    def __init__(self, values: dict[str, Any]) -> None:
        super().__init__(values)
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)


def test_the_names_gameday_reads_are_what_its_readers_read() -> None:
    """GAMEDAY_READS is the keys the --var readers look at (the stop conditions' Prometheus
    client, the alert watch, the fault windows' Pushgateway, the PromQL check's target
    version), no more, no fewer."""
    config = _Reads({"prometheus_url": "http://p:9090", "prometheus_ca_file": "/ca.pem"})
    settings_from(config, {})
    base = _Reads({"prometheus_base_url": "http://p:9090"})  # chaostoolkit-prometheus' name
    settings_from(base, {})
    alerts = _Reads({"alertmanager_url": "http://a:9093"})
    alertmanager_url(alerts)
    windows = _Reads({"pushgateway_url": "http://g:9091"})
    pushgateway_url(windows, {})
    version = _Reads({"prometheus_version": "2.42"})  # the PromQL check's target offline
    promql_target(version)
    read = config.read | base.read | alerts.read | windows.read | version.read
    # "alertmanager": a mapping scoping alertmanager_url (secrets style), which no --var gives
    assert read - {"alertmanager"} == GAMEDAY_READS


def _drain(label: str) -> dict[str, Any]:
    return {
        "title": "drain one node",
        "description": "planned only",
        "method": [
            {
                "type": "action",
                "name": "drain-one",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.node.actions",
                    "func": "drain_nodes",
                    "arguments": {"label_selector": label, "count": 1, "max_fraction": 0.5},
                },
            }
        ],
    }


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[EmulatorHandle, Path]]:
    """The emulator, and a kubeconfig whose current context is a dead API (port 9):
    only --context emulator reaches the cluster."""
    with start(tmp_path / "emulator.kubeconfig") as api:
        config = json.loads(api.kubeconfig.read_text())
        config["clusters"].append({"name": "dead", "cluster": {"server": "http://127.0.0.1:9"}})
        dead = {"cluster": "dead", "user": "gameday"}
        config["contexts"].append({"name": "dead", "context": dead})
        config["current-context"] = "dead"
        kubeconfig = tmp_path / "two-contexts.kubeconfig"
        kubeconfig.write_text(json.dumps(config))
        api.put(o.node("worker-0", {"role": "w"}), o.node("worker-1", {"role": "w"}))
        yield api, kubeconfig


@pytest.mark.parametrize("command", [["plan"], ["run", "--dry-run"]])
def test_kubeconfig_and_context_reach_the_cluster_on_run_and_plan(
    command: list[str],
    cluster: tuple[EmulatorHandle, Path],
    gameday: Gameday,
    write_experiment: Callable[..., Path],
    tmp_path: Path,
) -> None:
    api, kubeconfig = cluster
    path = write_experiment(_drain("role=w"))
    options = ["--kubeconfig", str(kubeconfig), "--context", "emulator", "--json", "plan.json"]
    result = gameday(*command, *options, str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    (planned,) = json.loads((tmp_path / "plan.json").read_text())["plans"]
    (row,) = planned["actions"]
    (node,) = row["plan"]["blast_radius"]["nodes"]
    assert node["name"] in {"worker-0", "worker-1"}
    assert any(call.startswith("list /nodes") for call in api.api_calls()), api.api_calls()
    # without --context, the kubeconfig's current context (the dead API) is used
    current = gameday(*command, "--kubeconfig", str(kubeconfig), "--json", "dead.json", str(path))
    assert current.returncode == 1
    (planned,) = json.loads((tmp_path / "dead.json").read_text())["plans"]
    assert "127.0.0.1" in planned["actions"][0]["error"]


def test_a_missing_kubeconfig_is_one_line_without_retries(
    gameday: Gameday, write_experiment: Callable[..., Path], tmp_path: Path
) -> None:
    path = write_experiment(_drain("role=w"))
    started = time.monotonic()
    result = gameday(
        "plan", "--kubeconfig", str(tmp_path / "nowhere"), "--json", "plan.json", str(path)
    )
    out = result.stdout + result.stderr
    assert result.returncode == 3, out  # refused: a missing privilege, nothing injected
    assert "urllib3" not in out and "Retrying" not in out, out
    (planned,) = json.loads((tmp_path / "plan.json").read_text())["plans"]
    (row,) = planned["actions"]
    assert row["status"] == "refused", row
    assert row["error"].startswith(
        f"NoClusterCredentials: no kubeconfig found: tried --kubeconfig {tmp_path / 'nowhere'} "
        "(does not exist), in-cluster (CHAOSTOOLKIT_IN_POD=true not set"
    ), row
    (line,) = [x for x in result.stderr.splitlines() if "no kubeconfig found" in x]
    assert line.startswith("✗ refused: ") and line.endswith("; nothing injected"), line
    assert time.monotonic() - started < 30
