"""The paths next to the truth table: run and gate agree, batches, gates, unprotected
runs, retries, and parity with `chaos run` on a standard experiment.

Everything runs through the real CLIs (``gameday`` and Chaos Toolkit's ``chaos``)
in subprocesses, with real ``sh`` processes and a real HTTP server on 127.0.0.1
(support.verdictkit); the stop condition is a real Prometheus (Debian's).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.verdictkit import BehaviourServer

from chaos_ext._products.sandbox.servers import prometheus
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def http() -> Iterator[BehaviourServer]:
    with BehaviourServer() as server:
        yield server


def _process(name: str, script: str, kind: str = "action") -> dict[str, Any]:
    return {
        "type": kind,
        "name": name,
        "provider": {"type": "process", "path": "sh", "arguments": ["-c", script]},
    }


def _experiment(title: str, rollbacks: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    probe = {**_process("holds", "exit 0", "probe"), "tolerance": 0}
    return {
        "title": title,
        "description": "verdict paths",
        "steady-state-hypothesis": {"title": "holds", "probes": [probe]},
        "method": [_process("inject", "exit 0")],
        "rollbacks": rollbacks,
        **extra,
    }


def _write(folder: Path, name: str, experiment: dict[str, Any]) -> Path:
    path = folder / name
    path.write_text(json.dumps(experiment))
    return path


def _junit(path: Path) -> ET.Element:
    return ET.parse(path).getroot()  # noqa: S314 - our own file


@pytest.mark.parametrize("kind", ["process", "http"])
def test_a_failing_rollback_fails_run_and_gate(
    kind: str, tmp_path: Path, gameday: Run, http: BehaviourServer
) -> None:
    """`kubectl delete networkpolicy` exiting 1, or an HTTP rollback answered 500."""
    rollback = (
        _process("kubectl-delete-networkpolicy", "echo 'not found' >&2; exit 1")
        if kind == "process"
        else {
            "type": "action",
            "name": "undo-over-http",
            "provider": {"type": "http", "url": http.url(mode="fail")},
        }
    )
    path = _write(tmp_path, "e.json", _experiment(f"{kind} rollback fails", [rollback]))
    ran = gameday("run", str(path), "--journal", str(tmp_path / "run.json"))
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "rollback-failed (exit 2)" in ran.stdout + ran.stderr
    gate = gameday(
        "gate", str(path), "--junit", str(tmp_path / "j.xml"), "--journal-dir", str(tmp_path)
    )
    assert gate.returncode == 2, gate.stdout + gate.stderr
    assert "0.0 / 100 (0 of 1 hypotheses held)" in gate.stdout + gate.stderr
    root = _junit(tmp_path / "j.xml")
    error = root.find(".//testcase[@name='faults rolled back']/error")
    assert error is not None and error.get("type") == "RollbackIncomplete"
    assert root.get("errors") == "1"


def test_a_failing_process_action_fails_the_run(tmp_path: Path, gameday: Run) -> None:
    experiment = _experiment("kubectl apply fails", [_process("undo", "exit 0")])
    experiment["method"] = [_process("kubectl-apply", "echo 'error: no objects' >&2; exit 1")]
    path = _write(tmp_path, "e.json", experiment)
    ran = gameday("run", str(path), "--journal", str(tmp_path / "j.json"))
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "failed (exit 2)" in ran.stdout + ran.stderr
    assert "failing result: 'kubectl-apply' exited 1: error: no objects" in ran.stdout + ran.stderr
    journal = json.loads((tmp_path / "j.json").read_text())
    assert [r["activity"]["name"] for r in journal["rollbacks"]] == ["undo"]  # still undone


def test_an_unsteady_run_runs_no_rollback(tmp_path: Path, gameday: Run) -> None:
    """remove_deny_all_ingress with no cluster would fail; it is not needed."""
    experiment = _experiment("unsteady", [_process("remove-deny-all-ingress", "exit 1")])
    experiment["steady-state-hypothesis"]["probes"][0]["provider"]["arguments"] = ["-c", "exit 3"]
    path = _write(tmp_path, "e.json", experiment)
    ran = gameday("run", str(path), "--journal", str(tmp_path / "j.json"))
    assert ran.returncode == 4, ran.stdout + ran.stderr
    assert "nothing was injected, rollbacks not needed" in ran.stdout + ran.stderr
    journal = json.loads((tmp_path / "j.json").read_text())
    assert journal["rollbacks"] == []
    assert journal["gameday"]["outcome"] == "unsteady"


def test_an_ungraceful_exit_still_runs_the_rollbacks(tmp_path: Path, gameday: Run) -> None:
    marker = tmp_path / "rolled-back"
    experiment = _experiment("ungraceful", [_process("echo-undo", f"echo undone > {marker}")])
    experiment["method"] = [
        {
            "type": "action",
            "name": "leave",
            "background": True,
            "provider": {"type": "python", "module": "chaoslib.exit", "func": "exit_ungracefully"},
        },
        _process("work", "sleep 5"),
    ]
    path = _write(tmp_path, "e.json", experiment)
    ran = gameday("run", str(path), "--journal", str(tmp_path / "j.json"))
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert marker.read_text() == "undone\n"
    journal = json.loads((tmp_path / "j.json").read_text())
    assert [r["activity"]["name"] for r in journal["rollbacks"]] == ["echo-undo"]
    assert journal["rollbacks"][0]["status"] == "succeeded"
    assert journal["gameday"]["ended"] == "ungracefully"
    assert "ended ungracefully" in ran.stdout + ran.stderr


@pytest.fixture(scope="module")
def prom() -> Iterator[PrometheusServer]:
    with prometheus.start(targets=[], scrape_interval="1s") as server:
        yield server


def test_a_stop_condition_in_a_batch_marks_the_rest_not_run(
    tmp_path: Path, gameday: Run, prom: PrometheusServer
) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "interval_seconds": 0.5,
                "conditions": [
                    {
                        "name": "always-breached",
                        "promql": "vector(1)",
                        "tolerance": {"op": "<", "threshold": 0},
                    }
                ],
            }
        )
    )
    config = {"configuration": {"prometheus_url": prom.url}}
    first = _experiment("e1", [_process("undo", "exit 0")], **config)
    first["method"] = [_process("work", "sleep 20")]
    e1 = _write(tmp_path, "e1.json", first)
    e2 = _write(tmp_path, "e2.json", _experiment("e2", [_process("undo", "exit 0")], **config))
    gate = gameday(
        "gate",
        "--abort-on",
        str(plan),
        str(e1),
        str(e2),
        "--junit",
        str(tmp_path / "j.xml"),
        "--journal-dir",
        str(tmp_path),
    )
    assert gate.returncode == 2, gate.stdout + gate.stderr
    assert "e2.json: not-run (exit 2)" in gate.stdout + gate.stderr
    assert "0.0 / 100 (0 of 2 hypotheses held)" in gate.stdout + gate.stderr
    root = _junit(tmp_path / "j.xml")
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {"gameday: e1", "gameday: e2"}
    verdict = suites["gameday: e2"].find("testcase[@name='steady state held']/error")
    assert verdict is not None and verdict.get("type") == "NotRun"
    assert "e1.json was aborted before it" in (verdict.get("message") or "")
    aborted = suites["gameday: e1"].find("testcase[@name='steady state held']/error")
    assert aborted is not None and aborted.get("type") == "Aborted"
    journal = json.loads((tmp_path / "journal-e2.json").read_text())
    assert journal["gameday"]["outcome"] == "not-run"


@pytest.mark.parametrize("case", ["no hypothesis", "skip"])
def test_a_gate_with_nothing_measured_is_refused(case: str, tmp_path: Path, gameday: Run) -> None:
    experiment = _experiment("nothing measured", [])
    args = []
    if case == "no hypothesis":
        del experiment["steady-state-hypothesis"]
    else:
        args = ["--hypothesis-strategy", "skip"]
    path = _write(tmp_path, "x.json", experiment)
    gate = gameday("gate", *args, str(path), "--junit", str(tmp_path / "j.xml"))
    assert gate.returncode == 3, gate.stdout + gate.stderr
    lines = [line for line in (gate.stdout + gate.stderr).splitlines() if line.startswith("gate:")]
    assert len(lines) == 1, gate.stdout + gate.stderr
    assert not (tmp_path / "j.xml").exists()


def test_a_run_without_its_control_is_recorded_and_fails_the_gate(
    tmp_path: Path, gameday: Run
) -> None:
    control = {"name": "safety", "provider": {"type": "python", "module": "no_such_control_mod"}}
    path = _write(tmp_path, "e.json", _experiment("unprotected", [], controls=[control]))
    assert gameday("run", str(path)).returncode == 3  # refused without the flag
    ran = gameday(
        "run", "--allow-missing-controls", str(path), "--journal", str(tmp_path / "j.json")
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    journal = json.loads((tmp_path / "j.json").read_text())
    assert "no_such_control_mod" in " ".join(journal["gameday"]["unprotected"])
    report = gameday("report", str(tmp_path / "j.json"), "-o", str(tmp_path / "r"))
    assert report.returncode == 0, report.stdout + report.stderr
    assert "RAN WITHOUT A SAFETY CONTROL" in (tmp_path / "r" / "summary.md").read_text()
    assert 'id="unprotected"' in (tmp_path / "r" / "report.html").read_text()
    gate = gameday(
        "gate", "--journals", str(tmp_path / "j.json"), "--junit", str(tmp_path / "g.xml")
    )
    assert gate.returncode == 2, gate.stdout + gate.stderr
    props = {p.get("name"): p.get("value") for p in _junit(tmp_path / "g.xml").iter("property")}
    assert "no_such_control_mod" in props["unprotected"]
    allowed = gameday(
        "gate",
        "--journals",
        "--allow-missing-controls",
        str(tmp_path / "j.json"),
        "--junit",
        str(tmp_path / "g2.xml"),
    )
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr


def test_a_successful_retry_turns_the_red_banner_amber(tmp_path: Path, gameday: Run) -> None:
    ready = tmp_path / "cluster-back"
    path = _write(
        tmp_path, "e.json", _experiment("retried", [_process("undo", f"test -e {ready}")])
    )
    journal = tmp_path / "j.json"
    assert gameday("run", str(path), "--journal", str(journal)).returncode == 2
    failed = gameday("report", str(journal), "-o", str(tmp_path / "r1"))
    assert failed.returncode == 0
    assert 'id="rollback-failed"' in (tmp_path / "r1" / "report.html").read_text()
    still = gameday("rollback", "--journal", str(journal))
    assert still.returncode == 2, (
        still.stdout + still.stderr
    )  # the process still exits 1: still failing
    ready.touch()
    retried = gameday("rollback", "--journal", str(journal))
    assert retried.returncode == 0, retried.stdout + retried.stderr
    gameday("report", str(journal), "-o", str(tmp_path / "r2"))
    html = (tmp_path / "r2" / "report.html").read_text()
    assert 'id="rollback-failed"' not in html
    assert 'class="banner amber" id="retried"' in html
    assert "failed, then retried successfully at" in (tmp_path / "r2" / "summary.md").read_text()


def test_a_standard_experiment_chaos_run_completes_is_held_by_gameday(
    tmp_path: Path, gameday: Run, http: BehaviourServer
) -> None:
    """Chaos Toolkit's own shapes: process and HTTP probes with tolerances, a pause, an
    HTTP action and a process rollback (docs.chaostoolkit.org's experiment reference)."""
    experiment = {
        "version": "1.0.0",
        "title": "standard",
        "description": "ctk reference shape",
        "tags": ["ctk"],
        "steady-state-hypothesis": {
            "title": "services are up",
            "probes": [
                {
                    "type": "probe",
                    "name": "web-answers",
                    "tolerance": 200,
                    "provider": {"type": "http", "url": http.url(), "timeout": 3},
                },
                {
                    "type": "probe",
                    "name": "exits-0",
                    "tolerance": 0,
                    "provider": {"type": "process", "path": "true"},
                },
            ],
        },
        "method": [
            {
                "type": "action",
                "name": "call-web",
                "pauses": {"after": 0.2},
                "provider": {"type": "http", "url": http.url(), "method": "GET"},
            }
        ],
        "rollbacks": [
            {
                "type": "action",
                "name": "echo",
                "provider": {"type": "process", "path": "echo", "arguments": "done"},
            }
        ],
    }
    path = _write(tmp_path, "std.json", experiment)
    chaos = shutil.which("chaos", path=str(Path(sys.executable).parent))
    assert chaos is not None
    done = subprocess.run(
        [
            chaos,
            "--no-version-check",
            "run",
            "--journal-path",
            str(tmp_path / "ctk.json"),
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    ctk = json.loads((tmp_path / "ctk.json").read_text())
    assert ctk["status"] == "completed" and ctk["deviated"] is False, done.stderr
    ran = gameday("run", str(path), "--journal", str(tmp_path / "gd.json"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert json.loads((tmp_path / "gd.json").read_text())["gameday"]["outcome"] == "held"
