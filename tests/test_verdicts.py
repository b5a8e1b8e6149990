"""Verdicts a release gate can trust: rollback-failed and unsteady runs, end to end.

Each test runs the real ``gameday`` CLI in a subprocess. Faults and targets are
real: a network namespace created by the experiment (kernel object, checked
with ``ip netns``), Kubernetes through chaostoolkit-kubernetes and the real
client (an unreachable API server, then the kmock emulator stopped mid-run).
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import k8s_objects as o
from support.harness import netns_list
from support.k8s_emulator import EmulatorHandle, emulator  # noqa: F401 - fixture

from chaos_ext._core.ledger import Ledger

Run = Callable[..., subprocess.CompletedProcess[str]]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _faultkit(label: str, func: str, kind: str = "action", **arguments: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "name": label,
        "provider": {
            "type": "python",
            "module": "support.faultkit",
            "func": func,
            "arguments": arguments,
        },
    }


def _loopback_answers() -> dict[str, Any]:
    """A hypothesis that holds (exit code 0)."""
    return {
        "type": "probe",
        "name": "loopback-answers",
        "tolerance": 0,
        "provider": {"type": "process", "path": "true"},
    }


def _unreachable_kubeconfig(path: Path) -> Path:
    port = _closed_port()
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "gone",
                "clusters": [{"name": "gone", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t0ken-not-used"}}],
                "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}],
            }
        )
    )
    return path


def _chaosk8s_rollback_experiment(netns: str) -> dict[str, Any]:
    """Hypothesis holds; the method makes a real namespace; a chaosk8s rollback fails."""
    return {
        "title": "a rollback that cannot reach its cluster",
        "description": "chaostoolkit-lib issue 94: rollback unsuccessful, yet experiment passed",
        "steady-state-hypothesis": {"title": "loopback", "probes": [_loopback_answers()]},
        "method": [_faultkit("make-a-namespace", "create_netns", name=netns)],
        "rollbacks": [
            _faultkit("remove-the-namespace", "remove_netns", name=netns),
            {
                "type": "action",
                "name": "remove-deny-all-ingress",
                "provider": {
                    "type": "python",
                    "module": "chaosk8s.networking.actions",
                    "func": "remove_deny_all_ingress",
                    "arguments": {"ns": "default"},
                },
            },
        ],
    }


def _junit_cases(path: Path) -> dict[str, ET.Element]:
    root = ET.parse(path).getroot()  # noqa: S314 - our own file
    return {c.get("name", ""): c for c in root.iter("testcase")}


def test_a_failed_chaosk8s_rollback_fails_run_and_gate(
    gameday: Run,
    write_experiment: Callable[..., Path],
    tmp_path: Path,
    netns_name: str,
    ledger_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(_unreachable_kubeconfig(tmp_path / "gone.kubeconfig")))
    path = write_experiment(_chaosk8s_rollback_experiment(netns_name))

    run = gameday("run", "--journal", "journal.json", str(path))
    assert run.returncode == 2, run.stdout + run.stderr
    journal = json.loads((tmp_path / "journal.json").read_text())
    gd = journal["gameday"]
    assert gd["outcome"] == "rollback-failed" and gd["exit_code"] == 2
    assert gd["hypothesis_outcome"] == "held"  # the hypothesis did hold: the rollback did not
    assert any("remove-deny-all-ingress" in p for p in gd["rollback_problems"])
    assert "rollback-failed (exit 2)" in run.stderr
    assert netns_name not in netns_list()  # the namespace rollback itself did run

    gate = gameday("gate", str(path), "--junit", "gate.xml", "--journal-dir", "gate")
    assert gate.returncode == 2, gate.stdout + gate.stderr
    assert "0.0 / 100 (0 of 1 hypotheses held)" in gate.stderr
    cases = _junit_cases(tmp_path / "gate.xml")
    error = cases["faults rolled back"].find("error")
    assert error is not None and error.get("type") == "RollbackIncomplete"
    assert "remove-deny-all-ingress" in (error.get("message") or "")
    assert "gameday rollback --journal" in (error.text or "")
    assert cases["steady state held"].find("failure") is None  # the hypothesis held
    assert Ledger(ledger_path).open_entries() == []

    # read back as journals, the gate gives the same verdict
    again = gameday("gate", "--journals", "journal.json", "--junit", "again.xml")
    assert again.returncode == 2, again.stdout

    report = gameday("report", "journal.json", "-o", "report")
    assert report.returncode == 0, report.stdout + report.stderr
    summary = (tmp_path / "report" / "summary.md").read_text()
    head = summary.split("| experiment |")[0]
    assert "A ROLLBACK DID NOT COMPLETE" in head and "remove-deny-all-ingress" in head
    assert "gameday rollback --journal" in head
    html = (tmp_path / "report" / "report.html").read_text()
    assert html.index('id="rollback-failed"') < html.index('id="score"')


def test_a_retried_rollback_undoes_the_fault_and_clears_the_verdict(
    gameday: Run,
    write_experiment: Callable[..., Path],
    tmp_path: Path,
    netns_name: str,
    emulator: EmulatorHandle,  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`gameday rollback --journal` re-runs the rollback that failed, now that it can work."""
    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "chaostoolkit-deny-all-ingress", "namespace": "default"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }
    emulator.put(policy)  # the fault, as chaosk8s' deny_all_ingress leaves it
    monkeypatch.setenv("KUBECONFIG", str(_unreachable_kubeconfig(tmp_path / "gone.kubeconfig")))
    path = write_experiment(_chaosk8s_rollback_experiment(netns_name))
    run = gameday("run", "--journal", "journal.json", str(path))
    assert run.returncode == 2, run.stdout + run.stderr
    assert emulator.items("NetworkPolicy")  # still there: the rollback could not reach it

    monkeypatch.setenv("KUBECONFIG", str(emulator.kubeconfig))  # the operator fixes access
    retry = gameday("rollback", "--journal", "journal.json")
    assert retry.returncode == 0, retry.stdout + retry.stderr
    assert "remove-deny-all-ingress succeeded" in retry.stderr
    assert emulator.items("NetworkPolicy") == []  # checked on the cluster itself
    journal = json.loads((tmp_path / "journal.json").read_text())
    assert [r["status"] for r in journal["gameday"]["rollback_retries"]] == ["succeeded"]
    gate = gameday("gate", "--journals", "journal.json", "--junit", "g.xml")
    assert gate.returncode == 0, gate.stdout + gate.stderr
    again = gameday("rollback", "--journal", "journal.json")
    assert again.returncode == 0 and "no rollback left to retry" in again.stderr


def test_a_failed_chaos_ext_rollback_fails_run_and_keeps_the_fault_listed(
    gameday: Run,
    write_experiment: Callable[..., Path],
    tmp_path: Path,
    emulator: EmulatorHandle,  # noqa: F811 - the fixture
    ledger_path: Path,
) -> None:
    """A drain's undo cannot reach the cluster (the API server went away mid-run)."""
    nodes = [f"worker-{i}" for i in range(3)]
    emulator.put([o.node(n, {"pool": "verdicts"}) for n in nodes])
    flag = tmp_path / "drained.flag"
    experiment = {
        "title": "a drain whose cluster goes away",
        "description": "uncordon_drained_nodes cannot reach the API server",
        "steady-state-hypothesis": {"title": "always", "probes": [_loopback_answers()]},
        "method": [
            {
                "type": "action",
                "name": "drain-one",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.node.actions",
                    "func": "drain_nodes",
                    "arguments": {
                        "label_selector": "pool=verdicts",
                        "count": 1,
                        "max_fraction": 0.34,
                        "timeout_seconds": 30,
                    },
                },
            },
            {
                "type": "action",
                "name": "signal-and-wait",
                "provider": {
                    "type": "process",
                    "path": "sh",
                    "arguments": ["-c", f"touch {flag}; sleep 4"],
                    "timeout": 30,
                },
            },
        ],
        "rollbacks": [
            {
                "type": "action",
                "name": "uncordon",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.node.actions",
                    "func": "uncordon_drained_nodes",
                },
            }
        ],
    }
    path = write_experiment(experiment)

    def stop_the_cluster() -> None:
        deadline = time.monotonic() + 120
        while not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        emulator.stop()

    stopper = threading.Thread(target=stop_the_cluster, daemon=True)
    stopper.start()
    run = gameday("run", "--journal", "journal.json", str(path), timeout=240)
    stopper.join(timeout=5)
    assert flag.exists(), run.stdout + run.stderr
    assert run.returncode == 2, run.stdout + run.stderr
    journal = json.loads((tmp_path / "journal.json").read_text())
    gd = journal["gameday"]
    assert gd["outcome"] == "rollback-failed", gd
    assert any("node-drain" in p and "could not be undone" in p for p in gd["rollback_problems"])
    assert [e.kind for e in Ledger(ledger_path).open_entries()] == ["node-drain"]
    assert "gameday rollback" in run.stderr


def test_an_unsteady_baseline_injects_nothing_and_exits_4(
    gameday: Run,
    write_experiment: Callable[..., Path],
    tmp_path: Path,
    netns_name: str,
    ledger_path: Path,
) -> None:
    port = _closed_port()  # the "service" is down before anything is injected
    experiment = {
        "title": "a service that is already down",
        "description": "the before-method hypothesis fails",
        "steady-state-hypothesis": {
            "title": "service answers",
            "probes": [
                _faultkit("service-answers", "port_open", kind="probe", port=port)
                | {"tolerance": True}
            ],
        },
        "method": [_faultkit("make-a-namespace", "create_netns", name=netns_name)],
    }
    path = write_experiment(experiment)
    run = gameday("run", "--journal", "journal.json", str(path))
    assert run.returncode == 4, run.stdout + run.stderr
    assert "unsteady (exit 4)" in run.stderr
    assert netns_name not in netns_list()  # the fault never ran: checked at the kernel
    assert Ledger(ledger_path).history() == []  # ... and nothing was ever recorded
    journal = json.loads((tmp_path / "journal.json").read_text())
    assert journal["gameday"]["outcome"] == "unsteady" and journal["run"] == []

    gate = gameday("gate", "--journals", "journal.json", "--junit", "g.xml", "--min-score", "0")
    assert gate.returncode == 4, gate.stdout  # a gate fails on it, even with --min-score
    assert "1 unsteady run(s) left out" in gate.stderr
    error = _junit_cases(tmp_path / "g.xml")["steady state held"].find("error")
    assert error is not None and error.get("type") == "Unsteady"
    assert "nothing was injected" in (error.get("message") or "")

    report = gameday("report", "journal.json", "-o", "report")
    assert report.returncode == 0, report.stdout + report.stderr
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "**Nothing was injected**" in summary and "service-answers" in summary
    html = (tmp_path / "report" / "report.html").read_text()
    assert "no charts: the method did not run" in html and "<svg" not in html


def test_worst_exit_code_over_a_batch(
    gameday: Run, write_experiment: Callable[..., Path], tmp_path: Path
) -> None:
    """Unsteady (4) next to a deviation (1): the batch says 1, the more severe verdict."""
    port = _closed_port()
    down = _faultkit("service-answers", "port_open", kind="probe", port=port) | {"tolerance": True}
    unsteady = write_experiment(
        {
            "title": "u",
            "description": "d",
            "steady-state-hypothesis": {"title": "t", "probes": [down]},
            "method": [_faultkit("nap", "nap", seconds=0)],
        },
        "u.json",
    )
    script = f"test -e {tmp_path}/marker && exit 1; exit 0"
    after_only = {
        "type": "probe",
        "name": "false-after",
        "tolerance": 0,
        "provider": {"type": "process", "path": "sh", "arguments": ["-c", script]},
    }
    deviates = write_experiment(
        {
            "title": "d",
            "description": "d",
            "steady-state-hypothesis": {"title": "t", "probes": [after_only]},
            "method": [
                {
                    "type": "action",
                    "name": "mark",
                    "provider": {
                        "type": "process",
                        "path": "touch",
                        "arguments": [str(tmp_path / "marker")],
                    },
                }
            ],
            "rollbacks": [
                {
                    "type": "action",
                    "name": "unmark",  # so that it recovers
                    "provider": {
                        "type": "process",
                        "path": "rm",
                        "arguments": ["-f", str(tmp_path / "marker")],
                    },
                }
            ],
        },
        "d.json",
    )
    run = gameday("run", "--journal-dir", "out", str(unsteady), str(deviates))
    assert run.returncode == 1, run.stdout + run.stderr
    assert re.search(r"u\.json: unsteady \(exit 4\)", run.stderr)
    assert re.search(r"d\.json: deviated \(exit 1\)", run.stderr)
