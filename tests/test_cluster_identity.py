"""An undo reaches the cluster its fault was made in, or refuses (issue 22, defect 1).

Two Kubernetes API emulators stand for clusters A and B; each has its own
``kube-system`` uid, as real clusters do. The campaign's steps: change the
sidecar template (or drain nodes) on A, SIGKILL the runner, run ``gameday
rollback`` with ``KUBECONFIG`` pointing at B. It must exit 2 naming both
clusters, change nothing on B, leave A's fault and its entry in place; with
``--kubeconfig``/``--context`` for A it restores A exactly. Cluster state is
read from the emulators (the API), never from the ledger.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import istio_fixtures as istio
from support import k8s_objects as o
from support.harness import cli_env, gameday_argv, wait_for
from support.k8s_emulator import EmulatorHandle, start

from chaos_ext._core.ledger import Ledger

POOL = {"role": "eat-workers"}


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[tuple[EmulatorHandle, EmulatorHandle]]:
    a = start(tmp_path / "a.kubeconfig")
    b = start(tmp_path / "b.kubeconfig")
    try:
        for cluster in (a, b):
            cluster.put(istio.injector_configmap(istio.injector_values(tag="1.22.3")))
            cluster.put([o.node(f"worker-{i}", POOL) for i in range(6)])
        # an explicit `unschedulable: false` must come back as it was (defect 8)
        explicit = o.node("worker-0", POOL)
        explicit["spec"]["unschedulable"] = False
        a.put(explicit)
        yield a, b
    finally:  # kmock patches aiohttp's resolver per server: stop them last in, first out
        b.stop()
        a.stop()


def _digest(cluster: EmulatorHandle) -> str:
    cm = cluster.get("ConfigMap", "istio-system", "istio-sidecar-injector")
    assert cm is not None
    return hashlib.sha256(json.dumps(cm["data"], sort_keys=True).encode()).hexdigest()


def _nodes(cluster: EmulatorHandle) -> dict[str, Any]:
    return {n["metadata"]["name"]: n["spec"] for n in cluster.items("Node")}


def _action(module: str, func: str, **arguments: Any) -> dict[str, Any]:
    return {
        "type": "action",
        "name": func,
        "provider": {"type": "python", "module": module, "func": func, "arguments": arguments},
    }


FAULTS = {
    "sidecar-template": _action(
        "chaos_ext.sidecar.actions",
        "change_sidecar_template",
        values_patch={"global": {"tag": "1.23.0"}},
    ),
    "node-drain": _action(
        "chaos_ext.node.actions",
        "drain_nodes",
        label_selector="role=eat-workers",
        count=2,
        pick="first",
        max_fraction=0.5,
    ),
}


def _inject_and_kill(
    kind: str, kubeconfig: Path, ledger: Path, tmp_path: Path, experiment: Path
) -> None:
    env = {**cli_env(ledger), "KUBECONFIG": str(kubeconfig)}
    runner = subprocess.Popen(
        gameday_argv("run", "--journal", "j.json", str(experiment)),
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: (
                any(e.kind == kind for e in Ledger(ledger).open_entries()) and runner.poll() is None
            ),
            60,
            f"the {kind} fault",
        )
        wait_for(lambda: _changed(kind), 30, "the change on cluster A")
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)


_CHANGED: dict[str, Callable[[], bool]] = {}


def _changed(kind: str) -> bool:
    return _CHANGED[kind]()


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_rollback_against_the_wrong_cluster_refuses_and_changes_nothing(
    kind: str,
    clusters: tuple[EmulatorHandle, EmulatorHandle],
    ledger_path: Path,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
) -> None:
    a, b = clusters
    a_before, b_before = _digest(a), _digest(b)
    a_nodes, b_nodes = _nodes(a), _nodes(b)
    _CHANGED["sidecar-template"] = lambda: _digest(a) != a_before
    _CHANGED["node-drain"] = lambda: (
        sum(bool(s.get("unschedulable")) for s in _nodes(a).values()) == 2
    )
    experiment = write_experiment(
        {
            "title": f"{kind} on cluster A",
            "description": "issue 22, defect 1",
            "method": [
                FAULTS[kind],
                {
                    "type": "probe",
                    "name": "wait",
                    "provider": {
                        "type": "process",
                        "path": "sleep",
                        "arguments": "120",
                        "timeout": 150,
                    },
                },
            ],
        }
    )
    _inject_and_kill(kind, a.kubeconfig, ledger_path, tmp_path, experiment)
    a_faulted, a_faulted_nodes = _digest(a), _nodes(a)

    def rollback(*args: str, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
        env = {**cli_env(ledger_path), "KUBECONFIG": str(kubeconfig)}
        return subprocess.run(
            gameday_argv("rollback", *args),
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    wrong = rollback(kubeconfig=b.kubeconfig)
    assert wrong.returncode == 2, wrong.stderr
    text = " ".join(wrong.stderr.split())
    assert "TargetMismatch" in text and "refusing to undo it there" in text
    assert a.url.rstrip("/") in text and b.url.rstrip("/") in text
    assert "ledger is clean" not in text
    assert (_digest(b), _nodes(b)) == (b_before, b_nodes)  # B untouched
    assert (_digest(a), _nodes(a)) == (a_faulted, a_faulted_nodes)  # A still faulted
    (entry,) = Ledger(ledger_path).open_entries()
    assert entry.identity is not None and entry.identity["scope"] == "kubernetes"

    right = rollback("--kubeconfig", str(a.kubeconfig), kubeconfig=b.kubeconfig)
    assert right.returncode == 0, right.stderr
    assert (_digest(a), _nodes(a)) == (a_before, a_nodes)  # byte for byte, field for field
    assert a_nodes["worker-0"]["unschedulable"] is False  # explicit false kept (defect 8)
    assert (_digest(b), _nodes(b)) == (b_before, b_nodes)
    assert Ledger(ledger_path).open_entries() == []


def _config_demo(folder: Path, development: str, test: str) -> Path:
    """The kubeconfig of kubernetes.io's "Configure Access to Multiple Clusters" task.

    Built with kubectl by the page's own commands (kubernetes/website,
    content/en/docs/tasks/access-application-cluster/configure-access-multiple-clusters.md,
    commit 00daab9750a0f8394375d997b90124c40d43c46a, CC BY 4.0): clusters
    ``development`` and ``test``, users ``developer`` and ``experimenter``, contexts
    ``dev-frontend``, ``dev-storage`` and ``exp-test``. Only the servers (the two
    emulators instead of https://1.2.3.4 and https://5.6.7.8) and the credentials
    (the emulators' token instead of certificate files and a password) differ.
    """
    path = folder / "config-demo"
    commands = [
        ["set-cluster", "development", f"--server={development.rstrip('/')}"],
        ["set-cluster", "test", f"--server={test.rstrip('/')}"],
        ["set-credentials", "developer", "--token=emulator-token"],
        ["set-credentials", "experimenter", "--token=emulator-token"],
        [
            "set-context",
            "dev-frontend",
            "--cluster=development",
            "--namespace=frontend",
            "--user=developer",
        ],
        [
            "set-context",
            "dev-storage",
            "--cluster=development",
            "--namespace=storage",
            "--user=developer",
        ],
        ["set-context", "exp-test", "--cluster=test", "--namespace=default", "--user=experimenter"],
        ["use-context", "dev-frontend"],
    ]
    for args in commands:
        subprocess.run(
            ["kubectl", "config", f"--kubeconfig={path}", *args],
            check=True,
            capture_output=True,
            timeout=30,
        )
    return path


def test_context_names_the_cluster_in_one_kubeconfig(
    clusters: tuple[EmulatorHandle, EmulatorHandle],
    ledger_path: Path,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
) -> None:
    """One kubeconfig with contexts for both: the recorded context is used, --context wins."""
    a, b = clusters
    demo = _config_demo(tmp_path, development=a.url, test=b.url)
    a_before, b_before = _digest(a), _digest(b)
    _CHANGED["sidecar-template"] = lambda: _digest(a) != a_before
    experiment = write_experiment(
        {
            "title": "template on development",
            "description": "-",
            "method": [
                FAULTS["sidecar-template"],
                {
                    "type": "probe",
                    "name": "wait",
                    "provider": {
                        "type": "process",
                        "path": "sleep",
                        "arguments": "120",
                        "timeout": 150,
                    },
                },
            ],
        }
    )
    _inject_and_kill("sidecar-template", demo, ledger_path, tmp_path, experiment)
    (entry,) = Ledger(ledger_path).open_entries()
    assert entry.identity is not None
    assert entry.identity["cluster"]["context"] == "dev-frontend"
    env = {**cli_env(ledger_path), "KUBECONFIG": str(demo)}

    def rollback(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            gameday_argv("rollback", *args),
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    wrong = rollback("--context", "exp-test")
    assert wrong.returncode == 2 and "refusing to undo it there" in " ".join(wrong.stderr.split())
    assert _digest(a) != a_before and _digest(b) == b_before  # A faulted, B untouched
    # the operator switched to the test cluster; the entry still names its own context
    subprocess.run(
        ["kubectl", "config", f"--kubeconfig={demo}", "use-context", "exp-test"],
        check=True,
        capture_output=True,
        timeout=30,
    )
    right = rollback()
    assert right.returncode == 0, right.stderr
    assert _digest(a) == a_before
