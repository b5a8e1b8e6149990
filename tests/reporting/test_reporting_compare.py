"""`gameday compare` on synthetic runs with controlled distributions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from support.gameday_cli import run_gameday
from support.journals import JournalBuilder

from chaos_ext._products.report.compare import compare_sets
from chaos_ext._products.report.direction import better_of
from chaos_ext._products.report.model import RunView, view_of
from chaos_ext._products.report.stats import Settings, direction_of
from chaos_ext.prometheus.catalogs import default_catalog

LATENCY = {"type": "range", "range": [0, 300]}  # p99 ms: lower is better


def _run(seed: int, mean: float, ok_rate: float = 1.0, throughput: float = 100) -> dict:
    rng = np.random.default_rng(seed)
    b = JournalBuilder("tuning", {"p99-ms": LATENCY, "requests-ok": True}, start=1e9 + seed * 1e3)
    b.check("before", "p99-ms", float(rng.normal(mean, 15)), 0)
    b.check("before", "requests-ok", True, 0)
    b.activity("add-latency", 1, 0.1, {"delay_seconds": 40})
    for i in range(40):
        b.check("during", "p99-ms", float(rng.normal(mean, 15)), 2 + i)
        b.check("during", "requests-ok", bool(rng.random() < ok_rate), 2 + i)
    b.activity("throughput", 50, 1, float(rng.normal(throughput, 5)), kind="probe")
    b.check("after", "p99-ms", float(rng.normal(mean, 15)), 60)
    return b.build()


def _views(seeds: range, mean: float, **kw: float) -> list[RunView]:
    return [view_of(_run(s, mean, **kw)) for s in seeds]


def _by_metric(baseline: list[RunView], tuned: list[RunView], **kw: object) -> dict:
    return {c.metric: c for c in compare_sets(baseline, tuned, **kw)}  # type: ignore[arg-type]


def test_a_known_improvement_is_improved() -> None:
    results = _by_metric(_views(range(3), 200), _views(range(10, 13), 150))
    p99 = results["p99-ms"]
    assert p99.verdict == "improved"
    assert (p99.better, p99.better_source) == ("lower", "tolerance")
    assert p99.ci[0] < -50 + 15 and p99.ci[1] < -50 + 35 and p99.ci[1] < 0
    assert p99.ci[0] < p99.difference < p99.ci[1]
    assert p99.p_value < 1e-6
    assert (p99.baseline.runs, p99.baseline.n) == (3, 3 * 42)


def test_a_known_regression_is_regressed() -> None:
    results = _by_metric(
        _views(range(3), 200, ok_rate=1.0), _views(range(20, 23), 260, ok_rate=0.7)
    )
    assert results["p99-ms"].verdict == "regressed"
    ok = results["requests-ok"]  # true/false: compared by the mean (success rate), higher is better
    assert (ok.statistic, ok.better, ok.verdict) == ("mean", "higher", "regressed")
    assert -0.45 < ok.difference < -0.15


def test_identical_distributions_are_no_change() -> None:
    same = _views(range(3), 200)
    results = _by_metric(same, same)
    assert {c.verdict for c in results.values()} == {"no change"}
    assert (
        results["p99-ms"].difference == 0
        and results["p99-ms"].ci[0] <= 0 <= results["p99-ms"].ci[1]
    )
    redrawn = _by_metric(_views(range(3), 200), _views(range(30, 33), 200))
    assert redrawn["p99-ms"].verdict == "no change"


def _error_ratio_run(seed: int, failing: int) -> dict:
    """An error ratio that is 0 except for ``failing`` of 40 samples during the fault."""
    rng = np.random.default_rng(seed)
    b = JournalBuilder(
        "tuning", {"error-ratio": {"type": "range", "range": [0, 0.01]}}, start=1e9 + seed * 1e3
    )
    for i in range(40):
        value = float(rng.uniform(0.5, 1.0)) if i < failing else 0.0
        b.check("during", "error-ratio", value, 2 + i)
    return b.build()


def test_a_mostly_zero_metric_is_judged_by_its_mean() -> None:
    fragile = [view_of(_error_ratio_run(s, failing=12)) for s in range(3)]
    tuned = [view_of(_error_ratio_run(s, failing=0)) for s in range(10, 13)]
    ratio = _by_metric(fragile, tuned)["error-ratio"]
    assert ratio.baseline.median == ratio.tuned.median == 0  # the median cannot see it
    assert (ratio.statistic, ratio.better, ratio.verdict) == ("mean", "lower", "improved")
    assert ratio.ci[1] < 0 and -0.3 < ratio.difference < -0.15
    same = _by_metric(fragile, fragile)["error-ratio"]
    assert (same.statistic, same.verdict) == ("median", "no change")


def test_direction_from_the_name_then_overridden() -> None:
    base, tuned = _views(range(6), 200), _views(range(40, 46), 200, throughput=130)
    found = _by_metric(base, tuned)["throughput"]
    assert (found.verdict, found.better, found.better_source) == ("improved", "higher", "name")
    result = _by_metric(base, tuned, overrides={"throughput": "lower"})["throughput"]
    assert (result.verdict, result.better_source) == ("regressed", "--better")


def test_a_name_that_says_nothing_is_changed_not_judged() -> None:
    def run(seed: int, value: float) -> RunView:
        b = JournalBuilder("tuning", {"widgets": 1}, start=1e9 + seed)
        for i in range(30):
            b.check("during", "widgets", value + float(np.random.default_rng(seed + i).normal()), i)
        return view_of(b.build())

    results = _by_metric([run(s, 10) for s in range(3)], [run(s, 20) for s in range(9, 12)])
    assert (results["widgets"].verdict, results["widgets"].better) == ("changed", None)


@pytest.mark.parametrize(
    ("tolerance", "expected"),
    [
        ({"type": "range", "range": [0, 0.3]}, "lower"),  # latency under 300 ms
        ({"type": "range", "range": [0.99, 1e308]}, "higher"),  # open upwards
        ({"type": "range", "range": [0.95, 1]}, "higher"),  # an SLO fraction
        ({"type": "range", "range": [10, 20]}, None),
        (0, "lower"),  # e.g. open faults, errors
        (True, "higher"),  # slo_holds: true is good whatever its op
        ("ok", None),
        (None, None),
    ],
)
def test_direction_from_tolerance(tolerance: object, expected: str | None) -> None:
    assert direction_of(tolerance) == expected


def test_cli_writes_markdown_and_html_and_can_fail_on_regression(tmp_path: Path) -> None:
    for side, seeds, mean in (("base", range(3), 200), ("tuned", range(50, 53), 260)):
        folder = tmp_path / side
        folder.mkdir()
        for seed in seeds:
            (folder / f"journal-{seed}.json").write_text(json.dumps(_run(seed, mean)))
    ledger = tmp_path / "ledger.sqlite3"
    out = run_gameday(
        tmp_path,
        ledger,
        "compare",
        "base",
        "tuned",
        "-o",
        "cmp",
        "--fail-on-regression",
        "--better",
        "throughput=higher",
    )
    assert out.returncode == 1, out.stderr
    markdown = (tmp_path / "cmp" / "comparison.md").read_text()
    row = next(line for line in markdown.splitlines() if line.startswith("| tuning | p99-ms |"))
    assert "| **regressed** | median |" in row and "lower (tolerance)" in row
    assert "Baseline: 3 run(s); tuned: 3 run(s)" in markdown
    html = (tmp_path / "cmp" / "comparison.html").read_text()
    # 3 metrics, each a time-series chart and a distribution
    assert html.count("<svg") == 2 * 3 and "<script" not in html
    single = run_gameday(
        tmp_path, ledger, "compare", "base/journal-0.json", "base/journal-0.json", "-o", "same"
    )
    assert single.returncode == 0, single.stderr
    assert "p99-ms: no change" in single.stderr


def test_cli_refuses_sets_without_a_shared_metric(tmp_path: Path) -> None:
    a, b = JournalBuilder("a", {"x": 0}), JournalBuilder("b", {"y": 0})
    a.check("before", "x", 0, 0)
    b.check("before", "y", 0, 0)
    (tmp_path / "a.json").write_text(json.dumps(a.build()))
    (tmp_path / "b.json").write_text(json.dumps(b.build()))
    out = run_gameday(tmp_path, tmp_path / "l.sqlite3", "compare", "a.json", "b.json", "-o", "o")
    assert out.returncode == 3
    assert "share no numeric metric" in out.stderr


def test_one_value_a_side_gives_the_direction_only_and_the_runs_needed() -> None:
    results = _by_metric(_views(range(1), 200), _views(range(5, 6), 200, throughput=40))
    # one throughput value per side (100 vs 40): far apart, but one value proves nothing
    found = results["throughput"]
    assert found.verdict == "direction only"
    assert (found.baseline.n, found.tuned.n) == (1, 1)
    assert found.runs_needed is not None and found.runs_needed >= 4
    assert re.match(
        r"direction only: 1\d\d → \d\d(\.\d+)? \(regressed\) in 1 run\(s\) vs 1; ", found.note
    ), found.note
    assert f"--repeat {found.runs_needed} for a confident answer" in found.note


def _unsteady_run(seed: int) -> dict:
    """A run whose before-method check failed: the method never ran."""
    b = JournalBuilder("tuning", {"p99-ms": LATENCY, "requests-ok": True}, start=2e9 + seed)
    b.check("before", "p99-ms", 900.0, 0)  # already far out of tolerance
    b.experiment["method"].append({"type": "action", "name": "add-latency"})  # never ran
    return b.build()


def test_unsteady_runs_take_no_part_in_a_comparison(tmp_path: Path) -> None:
    base_journals = [_run(s, 200) for s in range(3)]
    tuned_journals = [_run(s, 150) for s in range(10, 13)]
    unsteady = [_unsteady_run(1), _unsteady_run(2)]
    base, tuned = [view_of(j) for j in base_journals], [view_of(j) for j in tuned_journals]
    polluted = [*base, *(view_of(j) for j in unsteady)]
    assert polluted[-1].outcome == "unsteady"
    clean, dirty = _by_metric(base, tuned), _by_metric(polluted, tuned)
    assert dirty["p99-ms"].baseline.runs == clean["p99-ms"].baseline.runs == 3
    assert dirty["p99-ms"].difference == clean["p99-ms"].difference
    for side, journals in (("base", [*base_journals, *unsteady]), ("tuned", tuned_journals)):
        (tmp_path / side).mkdir()
        for i, journal in enumerate(journals):
            (tmp_path / side / f"journal-{i}.json").write_text(json.dumps(journal))
    out = run_gameday(
        tmp_path,
        tmp_path / "ledger.sqlite3",
        "compare",
        str(tmp_path / "base"),
        str(tmp_path / "tuned"),
        "-o",
        str(tmp_path / "cmp"),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 unsteady run(s) left out" in out.stdout + out.stderr
    md = (tmp_path / "cmp" / "comparison.md").read_text()
    assert "Left out: 2 baseline and 0 tuned unsteady run(s)" in md


def _synthetic(seed: int, shift: float, runs: int, samples: int, noise: float) -> list[RunView]:
    views = []
    for r in range(runs):
        rng = np.random.default_rng(seed * 100 + r)
        b = JournalBuilder("synthetic", {"latency-ms": LATENCY}, start=1e9 + seed * 1e4 + r)
        level = rng.normal(0, noise)  # run-to-run variation
        for i in range(samples):
            b.check("during", "latency-ms", 200 + shift + level + float(rng.normal(0, 20)), i)
        views.append(view_of(b.build()))
    return views


def test_the_verdict_words_never_contradict_the_numbers() -> None:
    """Synthetic pairs over effects, run counts and noise: whatever the interval and the
    test say, the word follows the one rule (docs/reporting.md), and a disagreement
    between them is reported as such, never as 'no change' or as a change."""
    settings = Settings(min_effect=0.05)
    seen: set[str] = set()
    for seed in range(24):
        shift = (0, 5, 15, 40, -40, 120)[seed % 6]
        runs, samples = (1, 2, 3, 5)[seed % 4], (1, 2, 12, 40)[(seed // 4) % 4]
        base = _synthetic(seed, 0, runs, samples, noise=(0, 30)[seed % 2])
        tuned = _synthetic(seed + 50, shift, runs, samples, noise=(0, 30)[seed % 2])
        for c in compare_sets(base, tuned, settings=settings):
            seen.add(c.verdict)
            by_test = c.p_value < settings.alpha
            by_interval = c.ci[0] > 0 or c.ci[1] < 0
            large = c.difference != 0 and (
                c.relative is None or abs(c.relative) >= settings.min_effect
            )
            if c.verdict in ("improved", "regressed", "changed"):
                assert by_test and by_interval and large, c
            elif c.verdict == "no change":
                assert by_test == by_interval, c
                assert not (by_test and large), c
            elif c.verdict == "inconclusive":
                assert by_test != by_interval or c.runs_needed, c
                assert "disagree" in c.note or "too few" in c.note, c
            else:
                assert c.verdict == "direction only" and c.runs_needed, c
    assert {"improved", "regressed", "no change", "direction only"} <= seen, seen


def test_every_catalog_probe_and_every_sandbox_metric_has_a_direction() -> None:
    for name, probe in default_catalog().probes.items():
        assert probe.better in ("lower", "higher"), name
        assert better_of(name, None, {})[1] == "catalog", name
    root = Path(__file__).resolve().parents[2]
    for path in sorted((root / "experiments" / "sandbox").glob("*.json")):
        experiment = json.loads(path.read_text())
        hypothesis = experiment.get("steady-state-hypothesis") or {}
        for activity in [*hypothesis.get("probes", []), *experiment.get("method", [])]:
            if activity.get("type") == "probe":
                name = activity["name"]
                found = better_of(name, activity.get("tolerance"), {})
                assert found[0] is not None, f"{path.name}: {name} has no known direction"


def test_compare_reads_report_folders_and_leads_with_the_headline(tmp_path: Path) -> None:
    """The demo's report folders keep their journals in run/ (and a redacted copy in
    journals/): compare finds them, pairs the experiments and says the answer first."""
    for side, seeds, mean in (("fragile", range(3), 260), ("tuned", range(60, 63), 150)):
        (tmp_path / side / "run").mkdir(parents=True)
        (tmp_path / side / "journals").mkdir()
        (tmp_path / side / "report.html").write_text("<html></html>")
        for seed in seeds:
            journal = _run(seed, mean)
            if side == "fragile":  # the fragile app deviates after the fault
                journal["deviated"] = True
            (tmp_path / side / "run" / f"journal-{seed}.json").write_text(json.dumps(journal))
            (tmp_path / side / "journals" / f"copy-{seed}.json").write_text(json.dumps(journal))
    out = run_gameday(tmp_path, tmp_path / "l.sqlite3", "compare", "fragile", "tuned", "-o", "cmp")
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert lines[0] == "hypotheses held: 0 of 3 (baseline) → 3 of 3 (tuned)", out.stderr
    assert lines[1].startswith("  tuning: deviated ×3 → held ×3 (held 0/3 → 3/3); "), lines[1]
    assert "(improved)" in lines[1]
    md = (tmp_path / "cmp" / "comparison.md").read_text()
    assert md.startswith("# Tuning comparison\n\n**hypotheses held: 0 of 3 (baseline) → 3 of 3")
    assert "Baseline: 3 run(s); tuned: 3 run(s)" in md  # run/, not run/ and journals/


def _errors_experiment(errors_per_second: float) -> dict:
    probe = {
        "type": "probe",
        "name": "app-dns-errors-per-second",
        "provider": {
            "type": "python",
            "module": "support.verdictkit",
            "func": "value",
            "arguments": {"x": errors_per_second},
        },
    }
    holds = {
        **probe,
        "name": "app-answers",
        "tolerance": True,
        "provider": {**probe["provider"], "func": "behave", "arguments": {}},
    }
    return {
        "title": "dns saturation",
        "description": "errors/s measured during the fault",
        "steady-state-hypothesis": {"title": "answers", "probes": [holds]},
        "method": [probe],
        "rollbacks": [],
    }


def test_repeat_gives_compare_the_runs_to_decide(tmp_path: Path) -> None:
    """One run a side: direction only, with the runs it needs; `run --repeat 4` a side
    (the fewest whose Mann-Whitney test can reach p < 0.05): improved, with confidence."""
    ledger = tmp_path / "l.sqlite3"
    for side, errors in (("fragile", 10.0), ("tuned", 0.0)):
        (tmp_path / f"{side}.json").write_text(json.dumps(_errors_experiment(errors)))
        once = run_gameday(tmp_path, ledger, "run", f"{side}.json", "--journal-dir", f"{side}1")
        assert once.returncode == 0, once.stderr
        out = run_gameday(
            tmp_path, ledger, "run", f"{side}.json", "--repeat", "4", "--journal-dir", side
        )
        assert out.returncode == 0, out.stderr
        assert sorted(p.name for p in (tmp_path / side).iterdir()) == [
            f"journal-{side}-{i}.json" for i in range(1, 5)
        ]
    single = run_gameday(tmp_path, ledger, "compare", "fragile1", "tuned1", "-o", "c1")
    assert single.returncode == 0, single.stderr
    assert (
        "app-dns-errors-per-second: direction only" in single.stderr
        and "10 → 0 (improved) in 1 run(s) vs 1; run --repeat 4" in single.stderr
    )
    repeated = run_gameday(tmp_path, ledger, "compare", "fragile", "tuned", "-o", "c4")
    assert repeated.returncode == 0, repeated.stderr
    line = next(x for x in repeated.stderr.splitlines() if x.startswith("app-dns-errors"))
    assert line.startswith("app-dns-errors-per-second: improved (median -10, CI [-10, -10]")
    assert "lower (name)" in (tmp_path / "c4" / "comparison.md").read_text()
