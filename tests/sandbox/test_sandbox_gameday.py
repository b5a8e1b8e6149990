"""The default game day against the real sandbox, end to end.

netns backend (this host): DNS saturation makes the fragile app deviate, with
the failures counted by the app's own metrics as cause=dns. vm backend: the
same topology in the micro-VM, where the DB latency fault (netem) runs.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from support.harness import ROOT, netns_list
from support.sandbox import sandbox_cli

from chaos_ext._core import helper as _helper


def _series_max(journal: dict, name: str) -> float:
    for run in journal["run"]:
        if run["activity"]["name"] == name:
            return max(v for _, v in run["output"]["series"] if not math.isnan(v))
    raise AssertionError(f"no {name} in the journal")


def test_dns_saturation_deviates_on_the_fragile_app(
    sandbox: tuple[str, Path], tmp_path: Path
) -> None:
    prefix, state = sandbox
    journals = tmp_path / "journals"
    experiment = str(ROOT / "experiments" / "sandbox" / "02-dns-saturation.json")
    result = sandbox_cli(
        prefix, state, "run", "--journal-dir", str(journals), experiment, timeout=400
    )
    assert result.returncode == 1, result.stderr[-3000:]
    journal = json.loads((journals / "journal-02-dns-saturation.json").read_text())
    assert journal["gameday"]["outcome"] == "deviated"
    before = journal["steady_states"]["before"]["probes"][0]
    after = journal["steady_states"]["after"]["probes"][0]
    assert before["tolerance_met"] and before["output"] < 0.01
    assert not after["tolerance_met"] and after["output"] > 0.5
    by_name = {r["activity"]["name"]: r for r in journal["run"]}
    held = by_name["hold-25-idle-tcp-connections-to-dnsmasq"]["output"]
    assert held["held"] == 25
    assert by_name["dnsmasq-processes"]["output"] == 21  # dnsmasq + its 20 TCP children
    assert by_name["app-dns-errors-per-second"]["output"] > 0  # the app's own count
    assert _series_max(journal, "app-error-ratio-over-time") > 0.5
    assert [r["activity"]["name"] for r in journal["rollbacks"]] == ["release-dns-connections"]
    assert {e["state"] for e in journal["gameday"]["ledger"]} == {"closed"}
    assert _helper.find_helpers(held["ledger_id"]) == []


# Measured on 2 cores (docs/sandbox.md): up 31 s quiet, 85 s at load 13; the latency
# experiment 49 s at load 9; down 9 s. Each step's cap is ~3x its worst measurement, and
# the test's own timeout covers all of them, so a slow step fails as itself, with its
# output, and `down` always runs.
UP_S, RUN_S, DOWN_S = 300, 240, 120


HOLD = (
    "import json,sys\n"
    "from chaos_ext.dns.actions import release_dnsmasq_tcp, saturate_dnsmasq_tcp\n"
    "if sys.argv[1] == 'hold':\n"
    " print(json.dumps(saturate_dnsmasq_tcp('10.77.0.30', connections=25, hold_seconds=120)))\n"
    "else:\n"
    " print(json.dumps(release_dnsmasq_tcp('10.77.0.30', 53)))\n"
)


def test_a_system_that_never_settles_is_unsteady_and_nothing_is_injected(
    sandbox: tuple[str, Path], tmp_path: Path
) -> None:
    """DNS already saturated outside the experiment: errors before any fault of its own."""
    prefix, state = sandbox
    # its own ledger: the runner sweeps faults whose owner process has gone (this one's has)
    env = {
        **os.environ,
        "GAMEDAY_LEDGER": str(tmp_path / "outside.sqlite3"),
        "PYTHONPATH": str(ROOT),
    }

    def holder(verb: str) -> subprocess.CompletedProcess[str]:
        argv = ["ip", "netns", "exec", f"{prefix}-mon", sys.executable, "-c", HOLD, verb]
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=120, env=env, check=False
        )

    held = holder("hold")
    assert held.returncode == 0, held.stderr
    try:
        journals = tmp_path / "journals"
        experiment = str(ROOT / "experiments" / "sandbox" / "03-db-exhaustion.json")
        result = sandbox_cli(
            prefix,
            state,
            "run",
            "--settle",
            "15",
            "--journal-dir",
            str(journals),
            experiment,
            timeout=300,
        )
    finally:
        released = holder("release")
    assert released.returncode == 0, released.stderr
    assert result.returncode == 4, result.stderr[-3000:]  # EXIT_UNSTEADY, never 1
    assert "not settled" in result.stdout + result.stderr
    journal = json.loads((journals / "journal-03-db-exhaustion.json").read_text())
    assert journal["gameday"]["outcome"] == "unsteady"
    assert journal["gameday"]["settle"]["settled"] is False
    assert journal["gameday"]["settle"]["waited_s"] >= 15
    assert not journal.get("run")  # the method never ran
    assert journal["gameday"]["ledger"] == []  # nothing was injected


@pytest.mark.slow
@pytest.mark.timeout(UP_S + RUN_S + DOWN_S + 120)
def test_vm_backend_runs_the_db_latency_fault(tmp_path: Path) -> None:
    """Services native, the node VM on the app->db path: netem there, over SSH."""
    prefix = "v" + uuid.uuid4().hex[:5]
    try:
        up = sandbox_cli(prefix, tmp_path, "up", "--backend", "vm", timeout=UP_S)
        assert up.returncode == 0, up.stderr[-3000:]
        assert "backend vm (requested)" in up.stderr
        status = sandbox_cli(prefix, tmp_path, "status", "--json", timeout=60)
        assert status.returncode == 0, status.stderr[-2000:]
        report = json.loads(status.stdout)
        assert report["backend"] == "vm"
        assert all(s["running"] for s in report["services"].values()), report
        node = report["services"]["node"]
        assert (node["address"], node["port"], node["answering"]) == ("10.77.0.50", 22, True)
        assert report["services"]["app"]["netns"] == f"{prefix}-app"  # native, not in the VM
        journals = tmp_path / "journals"
        experiment = str(ROOT / "experiments" / "sandbox" / "01-db-latency.json")
        run = sandbox_cli(
            prefix, tmp_path, "run", "--journal-dir", str(journals), experiment, timeout=RUN_S
        )
        journal = json.loads((journals / "journal-01-db-latency.json").read_text())
        delay = next(r for r in journal["run"] if r["activity"]["name"] == "delay-app-to-db-150ms")
        assert delay["status"] == "succeeded", delay
        assert delay["output"]["target"] == "ssh:10.77.0.50:22/eth1"  # on the node, over SSH
        assert delay["output"]["delay_seconds"] == 0.15
        rtt = next(r for r in journal["run"] if r["activity"]["name"] == "measured-rtt-to-db")
        assert rtt["output"]["median_ms"] > 140  # netem really delays the app->db path
        # the fragile app pays ~6 round trips per request: its median grows far beyond 300 ms
        assert run.returncode == 1, run.stderr[-3000:]
        assert journal["gameday"]["outcome"] == "deviated"
        before, after = (journal["steady_states"][p]["probes"][0] for p in ("before", "after"))
        assert before["tolerance_met"] and not after["tolerance_met"]
        assert after["output"] > 0.3
        assert [e["state"] for e in journal["gameday"]["ledger"]] == ["closed"]
    finally:
        down = sandbox_cli(prefix, tmp_path, "down", timeout=DOWN_S)
    assert down.returncode == 0, down.stderr
    assert "node VM powered off" in down.stderr
    assert _helper.find_helpers(f"sandbox-{prefix}") == []  # supervisor and qemu included
    assert not [n for n in netns_list() if n.startswith(f"{prefix}-")]
