"""Files of other tools given as an experiment: one line naming the format, exit 3.

Before, a Chaos Mesh manifest got `title: required... / description: required... /
method: required` and a multi-document file "invalid YAML": nothing said what the
file was. The inputs are in the shape of each project's documented examples
(tests/fixtures/foreign/SOURCES.md names them and their licence), plus two real
files: a journal written by a real `chaos run`, and upstream Prometheus rule files.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

Gameday = Callable[..., subprocess.CompletedProcess[str]]
FOREIGN = Path(__file__).parent / "fixtures" / "foreign"
RULES = Path(__file__).parent / "prometheus" / "fixtures" / "rules"

CASES = [
    ("chaos-mesh-networkchaos-delay.yaml", "a Chaos Mesh NetworkChaos (chaos-mesh.org/v1alpha1)"),
    ("chaos-mesh-podchaos-pod-failure.yaml", "a Chaos Mesh PodChaos (chaos-mesh.org/v1alpha1)"),
    ("chaos-mesh-schedule.yaml", "a Chaos Mesh Schedule (chaos-mesh.org/v1alpha1)"),
    ("litmus-chaosengine-pod-delete.yaml", "a LitmusChaos ChaosEngine (litmuschaos.io/v1alpha1)"),
    (
        "litmus-chaosexperiment-pod-delete.yaml",
        "a LitmusChaos ChaosExperiment (litmuschaos.io/v1alpha1)",
    ),
    (
        "litmus-pod-delete-rbac-and-engine.yaml",
        "multi-document YAML (4 documents): document 4 is a LitmusChaos ChaosEngine",
    ),
    ("krkn-config.yaml", "a Krkn config (kraken: chaos_scenarios ...)"),
    ("krkn-pod-scenario.yml", "a Krkn kill-pods plugin scenario file"),
    ("krkn-node-scenario.yml", "a Krkn node scenario file"),
    ("krkn-container-scenario.yml", "a Krkn container scenario file"),
    ("krkn-time-scenario.yml", "a Krkn time skew scenario file"),
    ("krkn-app-outage.yaml", "a Krkn application outage scenario file"),
]


def _one_line(result: subprocess.CompletedProcess[str], path: Path) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 3, result.stdout + result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"invalid: {path}: format: "), lines[0]
    assert "required" not in lines[0] and "crashed" not in lines[0]
    return lines[0]


@pytest.mark.parametrize(("name", "said"), CASES, ids=[c[0] for c in CASES])
def test_a_file_of_another_chaos_tool_is_named_in_one_line(
    name: str, said: str, gameday: Gameday
) -> None:
    path = FOREIGN / name
    line = _one_line(gameday("validate", str(path)), path)
    assert f"format: {said}" in line, line
    assert "not a Chaos Toolkit experiment" in line
    assert "docs/validation.md, 'Files of other tools'" in line


def test_run_refuses_them_with_the_same_line(gameday: Gameday, tmp_path: Path) -> None:
    path = FOREIGN / "chaos-mesh-networkchaos-delay.yaml"
    validated, ran = gameday("validate", str(path)), gameday("run", str(path))
    assert ran.returncode == 3 and ran.stderr == validated.stderr
    assert not list(tmp_path.glob("journal*.json"))


def test_a_journal_of_a_real_chaos_run_is_named_with_what_to_do(
    gameday: Gameday, tmp_path: Path
) -> None:
    experiment = {
        "title": "say hello",
        "description": "a real chaos run writes the journal",
        "method": [
            {
                "type": "action",
                "name": "hello",
                "provider": {"type": "process", "path": "echo", "arguments": "hello"},
            }
        ],
    }
    source = tmp_path / "hello.json"
    source.write_text(json.dumps(experiment))
    chaos = shutil.which("chaos", path=str(Path(sys.executable).parent))
    assert chaos is not None
    subprocess.run(
        [chaos, "--no-log-file", "run", "--journal-path", "journal.json", str(source)],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        check=True,
    )
    journal = tmp_path / "journal.json"
    line = _one_line(gameday("validate", str(journal)), journal)
    assert "format: a Chaos Toolkit journal (the record of a run, status 'completed')" in line
    assert "gameday report FILE" in line and "jq .experiment FILE" in line


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("coredns-mixin-alerts.yaml", "a Prometheus rule file (groups: ...)"),
        ("kubePrometheus-prometheusRule.yaml", "a Kubernetes PrometheusRule manifest"),
    ],
)
def test_upstream_rule_files_are_named(name: str, said: str, gameday: Gameday) -> None:
    path = RULES / name
    line = _one_line(gameday("validate", str(path)), path)
    assert f"format: {said}" in line, line


def test_several_experiments_in_one_yaml_file_are_named(gameday: Gameday, tmp_path: Path) -> None:
    one = "title: one\ndescription: d\nmethod: []\n"
    path = tmp_path / "two.yaml"
    path.write_text(f"{one}---\n{one.replace('one', 'two')}")
    line = _one_line(gameday("validate", str(path)), path)
    assert "multi-document YAML (2 documents separated by ---)" in line
    assert "put each experiment in its own file" in line
    # a trailing --- with nothing after it is still one document
    path.write_text(f"---\n{one}---\n")
    assert gameday("validate", str(path)).returncode == 0


def test_an_experiment_with_a_foreign_looking_key_is_judged_as_an_experiment(
    gameday: Gameday, write_experiment: Callable[..., Path]
) -> None:
    path = write_experiment(
        {"title": "t", "description": "d", "method": [], "kind": "NetworkChaos", "apiVersion": "x"}
    )
    result = gameday("validate", str(path))
    assert result.returncode == 0, result.stderr  # chaoslib tolerates unknown keys
