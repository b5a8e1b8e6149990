"""The verdict rules (pure) and the exit-code documentation checked against the code."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.harness import ROOT, gameday_argv
from support.journals import JournalBuilder

from chaos_ext._products.report.model import view_of
from chaos_ext._products.report.score import resilience_score
from chaos_ext._runner import verdict
from chaos_ext._runner.verdict import (
    EXIT_DEVIATED,
    EXIT_FAILED,
    EXIT_HELD,
    EXIT_INVALID,
    EXIT_UNSTEADY,
    OUTCOMES,
    outcome_of,
    worst_exit,
)


def _held(title: str = "ok") -> JournalBuilder:
    b = JournalBuilder(title, {"p": 1})
    b.check("before", "p", 1, 1)
    b.activity("inject", 1, 1)
    b.check("after", "p", 1, 3)
    return b


def _failed_rollback() -> dict[str, Any]:
    b = _held()
    b.activity("undo", 4, 1, "no cluster", status="failed", rollback=True)
    return b.build()


def _unsteady(title: str = "u") -> dict[str, Any]:
    b = JournalBuilder(title, {"p": 1})
    b.check("before", "p", 0, 1)
    b.experiment["method"].append({"type": "action", "name": "inject"})  # declared, never ran
    return b.build()


def test_a_check_only_experiment_that_misses_deviates() -> None:
    """No action in the method: the hypothesis is the test itself (an audit, an SLO check)."""
    b = JournalBuilder("audit", {"p": 1})
    b.check("before", "p", 0, 1)
    assert outcome_of(b.build()) == "deviated"


def test_a_failed_rollback_wins_over_a_held_hypothesis() -> None:
    journal = _failed_rollback()
    assert verdict.hypothesis_outcome(journal) == "held"
    assert outcome_of(journal) == "rollback-failed"
    assert verdict.rollback_problems(journal) == [
        "rollback 'undo' failed: ActivityFailed: no cluster"
    ]


def test_a_recorded_outcome_is_never_trusted_over_the_journal() -> None:
    journal: dict[str, Any] = _failed_rollback()
    journal["gameday"]["outcome"] = "held"  # as an older gameday wrote it
    assert outcome_of(journal) == "rollback-failed"


def test_a_successful_retry_clears_the_problem() -> None:
    journal: dict[str, Any] = _failed_rollback()
    journal["gameday"]["rollback_retries"] = [{"name": "undo", "status": "succeeded"}]
    assert outcome_of(journal) == "held"


def test_open_or_failed_ledger_entries_are_rollback_failed() -> None:
    journal: dict[str, Any] = _held().build()
    journal["gameday"]["ledger"] = [
        {"id": "e1", "kind": "netem", "target": "eth0", "state": "open"}
    ]
    assert outcome_of(journal) == "rollback-failed"
    journal["gameday"]["sweep"] = [
        {"id": "e1", "kind": "netem", "target": "eth0", "ok": False, "note": "EPERM"}
    ]
    problems = verdict.rollback_problems(
        journal, journal["gameday"]["sweep"], journal["gameday"]["ledger"]
    )
    assert problems == ["fault netem on eth0 (ledger e1) could not be undone: EPERM"]


def test_a_before_miss_is_unsteady_not_deviated() -> None:
    journal = _unsteady()
    assert outcome_of(journal) == "unsteady"
    view = view_of(journal)
    assert not view.injected
    assert "'p' = 0 out of tolerance" in view.unsteady_reason


def test_unsteady_runs_are_left_out_of_the_score() -> None:
    deviated = JournalBuilder("d", {"p": 1})
    deviated.check("before", "p", 1, 1)
    deviated.activity("a", 1, 1)
    deviated.check("after", "p", 0, 3)
    views = [view_of(_unsteady()), view_of(deviated.build()), view_of(_held().build())]
    score = resilience_score(views)
    assert (score.held, score.counted, score.left_out) == (1, 2, 1)
    assert score.value == pytest.approx(50.0)
    assert "1 unsteady run(s) left out" in score.text()


@pytest.mark.parametrize(
    ("codes", "worst"),
    [
        ([], EXIT_HELD),
        ([0, 4], EXIT_UNSTEADY),
        ([4, 1], EXIT_DEVIATED),
        ([1, 2, 4], EXIT_FAILED),
        ([0, 3], EXIT_INVALID),
    ],
)
def test_worst_exit(codes: list[int], worst: int) -> None:
    assert worst_exit(codes) == worst


def _readme_exit_table() -> dict[int, set[str]]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    table: dict[int, set[str]] = {}
    for code, outcomes in re.findall(r"^\| (\d) \| ([^|]+) \|", section, re.MULTILINE):
        table[int(code)] = {o.strip() for o in outcomes.split(",")}
    return table


def test_the_readme_exit_code_table_matches_the_code() -> None:
    table = _readme_exit_table()
    assert sorted(table) == [0, 1, 2, 3, 4, 5]
    from_code: dict[int, set[str]] = {}
    for outcome, code in OUTCOMES.items():
        from_code.setdefault(code, set()).add(outcome)
    from_code[EXIT_INVALID] = {"invalid", *from_code.get(EXIT_INVALID, set())}  # + refused
    assert table == from_code


def test_the_help_lists_every_exit_code() -> None:
    out = subprocess.run(
        gameday_argv("--help"),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(ROOT),
    ).stdout
    epilog = out.split("exit codes", 1)[1]
    for code, outcomes in _readme_exit_table().items():
        assert re.search(rf"^\s+{code}\s", epilog, re.MULTILINE), code
        assert any(o in epilog for o in outcomes if o != "invalid") or code == EXIT_INVALID
