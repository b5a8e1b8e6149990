"""SIGKILL of `gameday run` mid-drain, then `gameday rollback` uncordons exactly the drained nodes.

The emulator lives in this test process, so it outlives the killed runner.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support import k8s_objects as o
from support.harness import cli_env, gameday_argv, wait_for
from support.k8s_emulator import EmulatorHandle

from chaos_ext._core.ledger import Ledger


def _cordoned(emulator: EmulatorHandle) -> set[str]:
    return {n["metadata"]["name"] for n in emulator.items("Node") if n["spec"].get("unschedulable")}


@pytest.mark.undoes("node-drain")
def test_sigkill_mid_drain_then_rollback_uncordons_exactly_the_drained_nodes(
    emulator: EmulatorHandle,
    ledger_path: Path,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    pool = {"role": "eat-workers"}
    emulator.put([o.node(f"worker-{i}", pool) for i in range(9)])
    emulator.put(o.node("worker-9", pool, unschedulable=True))  # cordoned by someone else
    # a budget that never allows a disruption: the drain keeps retrying until killed
    emulator.put(o.deployment("shop", "web", replicas=4, nodes=["worker-0", "worker-1"]))
    emulator.put(o.pdb("shop", "web", match_labels={"app": "web"}, min_available=4))
    experiment = write_experiment(
        {
            "title": "drain two workers under a strict budget",
            "description": "killed mid-drain on purpose",
            "method": [
                {
                    "type": "action",
                    "name": "drain-two-workers",
                    "provider": {
                        "type": "python",
                        "module": "chaos_ext.node.actions",
                        "func": "drain_nodes",
                        "arguments": {
                            "label_selector": "role=eat-workers",
                            "count": 2,
                            "pick": "first",
                            "timeout_seconds": 120,
                            "backoff_max_seconds": 1,
                        },
                    },
                }
            ],
        }
    )
    runner = subprocess.Popen(
        gameday_argv("run", "--journal", str(tmp_path / "journal.json"), str(experiment)),
        env=cli_env(ledger_path),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(
            lambda: (
                _cordoned(emulator) == {"worker-0", "worker-1", "worker-9"}
                and len(emulator.events("evict-blocked")) >= 4
            ),
            60,
            "the drain to cordon and hit the budget",
        )
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)
        assert runner.stdout is not None
        runner.stdout.close()

    assert _cordoned(emulator) == {"worker-0", "worker-1", "worker-9"}  # the fault outlived it
    (entry,) = Ledger(ledger_path).open_entries()
    assert entry.kind == "node-drain" and entry.recipe["nodes"] == ["worker-0", "worker-1"]

    result = gameday("rollback")
    assert result.returncode == 0, result.stderr
    assert _cordoned(emulator) == {"worker-9"}
    assert Ledger(ledger_path).open_entries() == []
    assert len(emulator.items("Pod", "shop")) == 4  # the budget held: nothing was evicted
