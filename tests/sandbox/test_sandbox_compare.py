"""Did the tuning help? The fragile and the tuned app, each run REPEAT times in the real
sandbox, then `gameday compare` of the two sets of journals.

One run a side can only give the direction (docs/reporting.md); REPEAT runs a
side give the Mann-Whitney test enough independent observations to decide:
4 is the fewest whose two-sided test can reach p < 0.05 (2/70), and what
`gameday compare` asks for after one run of each ("run --repeat 4"). The DNS
saturation and DB exhaustion experiments are the two whose fix the incidents
needed (a DNS cache, a connection pool): their error rates must come out
`improved` at 95 % confidence. The values are also checked from the journals
themselves (the app's own counters, as the probes read them), with scipy's
test, independently of compare's words.

Measured on this project's 2-core machine, shared: fragile 4+4 runs and tuned
4+4 runs with their sandboxes up and down, about 8 minutes. The sandboxes are the
shared ones (conftest.py): the fragile one may already be up, the tuned one comes
up after the fragile runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import mannwhitneyu
from support.gameday_cli import run_gameday
from support.harness import ROOT
from support.sandbox import sandbox_cli

from chaos_ext._core.ledger import Ledger

REPEAT = 4
EXPERIMENTS = {  # experiment -> the app's error rate its fix removes
    "02-dns-saturation": "app-dns-errors-per-second",
    "03-db-exhaustion": "app-db-connect-errors-per-second",
}
# Each step's cap is ~3x its worst measurement (up 85 s at load 13, one run ~35 s).
UP_S, RUN_S, DOWN_S = 300, 3 * 35 * REPEAT * len(EXPERIMENTS), 120
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2 * (UP_S + RUN_S + DOWN_S) + 120)]


def _game_day(app: str, prefix: str, state: Path, tmp: Path) -> Path:
    """``sandbox run --repeat REPEAT`` of both experiments in the shared sandbox of APP."""
    journals = tmp / app
    paths = [str(ROOT / "experiments" / "sandbox" / f"{e}.json") for e in EXPERIMENTS]
    argv = ["run", "--repeat", str(REPEAT), "--journal-dir", str(journals), *paths]
    run = sandbox_cli(prefix, state, *argv, timeout=RUN_S)
    # the fragile app deviates (1), the tuned one holds (0)
    assert run.returncode == (1 if app == "fragile" else 0), run.stderr[-3000:]
    assert Ledger(state / "ledger.sqlite3").open_entries() == []
    return journals


def _errors(journals: Path, experiment: str, probe: str) -> list[float]:
    """The probe's output in each run's journal, as the app's counters gave it."""
    found = []
    for i in range(1, REPEAT + 1):
        journal = json.loads((journals / f"journal-{experiment}-{i}.json").read_text())
        assert journal["gameday"]["outcome"] in ("held", "deviated"), journal["gameday"]
        (value,) = [r["output"] for r in journal["run"] if r["activity"]["name"] == probe]
        found.append(float(value))
    return found


@pytest.mark.sandbox_app("tuned")
def test_repeated_runs_show_the_dns_and_db_fixes_improved_with_95_percent_confidence(
    sandbox: tuple[str, Path], shared_sandboxes: Any, tmp_path: Path
) -> None:
    fragile = _game_day("fragile", *sandbox, tmp_path)
    tuned_up = shared_sandboxes.get("tuned")  # up only now: not beside the fragile runs
    tuned = _game_day("tuned", tuned_up.prefix, tuned_up.state, tmp_path)
    for experiment, probe in EXPERIMENTS.items():
        before, after = _errors(fragile, experiment, probe), _errors(tuned, experiment, probe)
        assert min(before) > max(after), (probe, before, after)
        assert mannwhitneyu(before, after).pvalue < 0.05, (probe, before, after)
    out = run_gameday(
        tmp_path, tmp_path / "l.sqlite3", "compare", "fragile", "tuned", "-o", "cmp", timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stderr.splitlines()
    total = REPEAT * len(EXPERIMENTS)
    assert lines[0].startswith("hypotheses held: ") and lines[0].endswith(
        f" → {total} of {total} (tuned)"
    ), lines[0]
    markdown = (tmp_path / "cmp" / "comparison.md").read_text()
    assert "difference [95% CI]" in markdown
    each = f"{total} run(s) of {len(EXPERIMENTS)} experiment(s) ({REPEAT} each)"
    assert f"Baseline: {each}; tuned: {each}" in markdown
    for probe in EXPERIMENTS.values():
        line = next(x for x in lines if x.startswith(f"  {probe}, during the faults: "))
        assert line.startswith(f"  {probe}, during the faults: improved ("), line
        assert "independent runs" in line, line  # 4 runs a side: a test of the runs
        row = next(x for x in markdown.splitlines() if x.startswith(f"| {probe} | during"))
        assert "| **improved** |" in row and "lower (" in row, row
        assert "direction only" not in row
