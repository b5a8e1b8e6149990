"""Crash-matrix rows: two runs, one namespace spelled two ways, in one ledger and in two.

Issue 27, item 1. Run A (a real ``gameday run``) injects into a namespace
the test creates, spelled one way (``netns:NAME``, ``pid:PID`` of a process
inside it, ``netns:ALIAS`` bound by ``ip netns attach``), and stays alive
until told to finish. Meanwhile run B (another ``gameday run``) rolls back
under another spelling of the same namespace, with A's ledger or with a
ledger of its own. Then A finishes and rolls back itself.

Counted from both journals (the rollbacks' ``faults`` and the runner's
ledger sweep): 0 cross-run undos, A's fault undone once, by A. The target's
state is read through its own interface (``nft``, ``tc``), never the ledger:
A's fault is in place after B, and gone after A.

Kinds: the DNS rate limit (real nftables), and netem's ownership logic: the
kernel here has no sch_netem, so run A's action is a stand-in that records
the entry as add_latency does and installs the latency tree's root (htb
``1d1a:``, ``support.latency_stand_in``); B's and A's rollbacks are the real
remove_latency. The real netem tree's crash row is in the VM lane.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.dns_netlab import netns_tables
from support.harness import cli_env, gameday_argv, wait_for
from support.netlab import sh, tc_show
from support.netns_spellings import Spelled, spelled_namespace

from chaos_ext._core import ledger as fault_ledger
from chaos_ext._core.ledger import Ledger

pytestmark = pytest.mark.timeout(240)


@dataclass(frozen=True)
class Row:
    """One fault kind: its injection and rollback providers, and what is injected now."""

    name: str
    inject: Callable[[str], dict[str, Any]]
    undo: Callable[[str], dict[str, Any]]
    state: Callable[[Spelled], bool]  # True while the fault is in place


def _python(module: str, func: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "python", "module": module, "func": func, "arguments": arguments}


ROWS = {
    r.name: r
    for r in (
        Row(
            "dns-rate-limit",
            lambda t: _python("chaos_ext.dns.actions", "limit_dns_rate", pps=100, target=t),
            lambda t: _python("chaos_ext.dns.actions", "remove_dns_rate_limit", target=t),
            lambda ns: bool(netns_tables(ns.name)),
        ),
        Row(
            "netem",
            lambda t: _python(
                "support.latency_stand_in", "stand_in_latency", interface="va", target=t
            ),
            lambda t: _python(
                "chaos_ext.network.actions", "remove_latency", interface="va", target=t
            ),
            lambda ns: "qdisc htb 1d1a: root" in tc_show(ns.name, "va"),
        ),
    )
}

#: every ordered pair of different spellings for the reported kind, a rotation for netem
PAIRS = {
    "dns-rate-limit": [
        ("name", "pid"),
        ("pid", "name"),
        ("name", "alias"),
        ("alias", "name"),
        ("pid", "alias"),
        ("alias", "pid"),
    ],
    "netem": [("pid", "name"), ("alias", "pid"), ("name", "alias")],
}
CELLS = [
    (k, a, b, led)
    for k, pairs in PAIRS.items()
    for a, b in pairs
    for led in ("one ledger", "two ledgers")
]


@pytest.fixture
def ns() -> Iterator[Spelled]:
    with spelled_namespace() as made:
        sh("ip", "-n", made.name, "link", "add", "va", "type", "veth", "peer", "name", "vb")
        yield made


def _until_file(path: Path) -> dict[str, Any]:
    code = f"import os, time\nwhile not os.path.exists({str(path)!r}): time.sleep(0.05)"
    return {
        "type": "probe",
        "name": "until-told",
        "provider": {
            "type": "process",
            "path": sys.executable,
            "arguments": ["-c", code],
            "timeout": 180,
        },
    }


def _experiment(title: str, method: list[dict[str, Any]], undo: dict[str, Any]) -> dict[str, Any]:
    return {
        "title": title,
        "description": "issue 27, item 1: ownership by identity",
        "method": method,
        "rollbacks": [{"type": "action", "name": "undo", "provider": undo}],
    }


def _undone_by(journal: dict[str, Any]) -> list[str]:
    """Ledger ids this run undid itself: its rollbacks' ``faults`` and its ledger sweep."""
    ids = [
        f["ledger_id"]
        for r in journal.get("rollbacks", [])
        for f in (r.get("output") or {}).get("faults", [])
    ]
    return ids + [s["id"] for s in journal["gameday"]["sweep"] if s["ok"]]


@pytest.mark.parametrize(("kind", "spelled_a", "spelled_b", "ledgers"), CELLS)
def test_two_spellings_of_one_namespace_make_no_cross_run_undo(
    kind: str,
    spelled_a: str,
    spelled_b: str,
    ledgers: str,
    ns: Spelled,
    ledger_path: Path,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
) -> None:
    row = ROWS[kind]
    ledger_b = ledger_path if ledgers == "one ledger" else tmp_path / "b" / "ledger.sqlite3"
    finish = tmp_path / "finish-a"
    a_path = write_experiment(
        _experiment(
            "run A",
            [
                {"type": "action", "name": "inject", "provider": row.inject(ns.spell(spelled_a))},
                _until_file(finish),
            ],
            row.undo(ns.spell(spelled_a)),
        ),
        "a.json",
    )
    b_path = write_experiment(
        _experiment(
            "run B",
            [{"type": "probe", "name": "nothing", "provider": {"type": "process", "path": "true"}}],
            row.undo(ns.spell(spelled_b)),
        ),
        "b.json",
    )
    run_a = subprocess.Popen(
        gameday_argv("run", "--journal", "ja.json", str(a_path)),
        env=cli_env(ledger_path),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(lambda: row.state(ns), 90, "run A's fault")
        run_b = subprocess.run(
            gameday_argv("run", "--journal", "jb.json", str(b_path)),
            env=cli_env(ledger_b),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert run_b.returncode == 0, run_b.stdout + run_b.stderr
        assert row.state(ns), "run B's rollback took run A's fault"
    finally:
        finish.touch()
        out_a, _ = run_a.communicate(timeout=180)
    assert run_a.returncode == 0, out_a
    assert not row.state(ns), "run A's own rollback left its fault"

    journal_a = json.loads((tmp_path / "ja.json").read_text())
    journal_b = json.loads((tmp_path / "jb.json").read_text())
    (entry_a,) = Ledger(ledger_path).history(run_id=journal_a["gameday"]["run_id"])
    undone_a, undone_b = _undone_by(journal_a), _undone_by(journal_b)
    cross = [i for i in undone_b if i == entry_a.id]
    assert cross == [], f"cross-run undos: {cross}"
    assert undone_a == [entry_a.id], undone_a  # once, by its own run
    b_output = journal_b["rollbacks"][0]["output"]
    assert b_output["undone"] == 0 and "left alone" in json.dumps(b_output["unrecorded"])
    for path in {ledger_path, ledger_b}:
        assert Ledger(path).open_entries() == []
        verdict = fault_ledger.verify(path, full=True)
        assert verdict.ok, verdict.problems
