"""`gameday compare` compares like with like: window by window, with the method the
samples call for (synthetic journals with known values and a recorded timeline)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from support.comparekit import P95_EXPR, RATIO_EXPR, Probe, window_journal
from support.gameday_cli import run_gameday
from support.journals import JournalBuilder

from chaos_ext._products.report.compare import Compared, Run, compare_sets, run_of
from chaos_ext._products.report.direction import better_of
from chaos_ext._products.report.stats import Settings, compare_metric, direction_of
from chaos_ext.prometheus.catalogs import default_catalog

FAULT_AT, FAULT_S = 60.0, 20.0


def _p95(level: float, seed: int, tail: float | None = None) -> Probe:
    """A p95 series over 55 s of quiet baseline and the fault window: ``level`` (with
    1 % noise) while the fault is on; ``tail``: the previous experiment's latency in the
    first 4 s of the fault (what a 5 s rate still sees)."""
    rng = np.random.default_rng(seed)
    points = []
    for t in np.arange(5.0, FAULT_AT + FAULT_S, 1.0):
        value = 0.01 * (1 + 0.05 * rng.standard_normal())
        if t >= FAULT_AT:
            value = level * (1 + 0.01 * rng.standard_normal())
            if tail is not None and t < FAULT_AT + 4:
                value = tail
        points.append((float(t), float(value)))
    return Probe("app-p95-latency-over-time", points, P95_EXPR)


def _run(title: str, probe: Probe, seed: int = 0, recover_s: float | None = None) -> Run:
    journal = window_journal(
        title,
        start=1.9e9 + seed * 1e4,
        fault_at=FAULT_AT,
        fault_s=FAULT_S,
        probes=[probe],
        recover_s=recover_s,
    )
    return run_of(journal, f"journal-{seed}.json")


def _rows(compared: Compared) -> dict[tuple[str, str], object]:
    return {(c.metric, c.window): c for c in compared.rows}


def test_the_fault_window_is_compared_not_the_whole_series() -> None:
    """3 s -> 0.2 s p95 during the fault, the same quiet baseline: pooled with the
    baseline (what compare did) the medians barely move; window by window the fault
    window says improved, one run a side, and the baseline says no change."""
    fragile = _run("dns", _p95(3.0, seed=1), seed=1)
    tuned = _run("dns", _p95(0.2, seed=2), seed=2)
    rows = _rows(compare_sets([fragile], [tuned]))
    during = rows[("app-p95-latency-over-time", "during")]
    assert during.verdict == "improved", during
    assert during.ci is not None and during.ci[1] < 0
    assert during.p_value is None  # a time series: no p-value that assumes independence
    assert during.method.startswith("time series, 1 run(s) vs 1: moving-block bootstrap")
    assert 2.9 < during.baseline.value < 3.1 and 0.19 < during.tuned.value < 0.21
    assert during.separated and "do not overlap" in during.note
    assert "--repeat" not in during.note
    before = rows[("app-p95-latency-over-time", "before")]
    assert before.verdict == "no change", before
    assert before.ci is not None and before.ci[0] <= 0 <= before.ci[1]
    pooled = compare_metric(
        "pooled",
        [[v for _, v in fragile.view.series[-1].points]],
        [[v for _, v in tuned.view.series[-1].points]],
        ("lower", "x"),
    )
    assert abs(pooled.difference) < 0.01  # what the old comparison saw: the baseline


def test_a_samples_lookback_keeps_the_previous_experiment_out_of_the_fault_window() -> None:
    """rate(...[5s]) at the fault's first seconds still sees the experiment before it:
    those samples are not in the fault window."""
    fragile = _run("dns", _p95(3.0, seed=1), seed=1)
    tuned = _run("dns", _p95(0.005, seed=2, tail=0.198), seed=2)
    during = _rows(compare_sets([fragile], [tuned]))[("app-p95-latency-over-time", "during")]
    assert during.tuned.high < 0.006, during.tuned  # not 0.198
    # on at 60.01: a 5 s look-back starts inside it from t = 66 on, to the last, 79
    assert during.tuned.n == during.baseline.n == 14


def test_overlapping_fault_windows_are_no_change() -> None:
    rng = np.random.default_rng(7)

    def noisy(seed: int) -> Run:
        points = [(float(t), float(3.0 + 0.3 * rng.standard_normal())) for t in range(60, 80)]
        probe = Probe("app-p95-latency-over-time", [(55.0, 0.01), *points], P95_EXPR)
        return _run("dns", probe, seed=seed)

    during = _rows(compare_sets([noisy(1)], [noisy(2)]))[("app-p95-latency-over-time", "during")]
    assert during.verdict == "no change", during
    assert during.ci is not None and during.ci[0] < 0 < during.ci[1]
    assert not during.separated


def test_a_window_too_short_to_judge_says_so_in_words() -> None:
    def short(level: float, seed: int) -> Run:
        points = [(float(t), level) for t in range(50, 68)]
        journal = window_journal(
            "short",
            start=1.9e9 + seed * 1e4,
            fault_at=60,
            fault_s=7.5,
            probes=[Probe("app-p95-latency-over-time", points, P95_EXPR)],
        )
        return run_of(journal, f"j{seed}.json")

    during = _rows(compare_sets([short(3, 1)], [short(0.2, 2)]))[
        ("app-p95-latency-over-time", "during")
    ]
    assert during.verdict == "too short", during
    assert "lasted at most 7.5 s; each sample looks back 5 s" in during.note, during.note
    assert "2 sample(s) inside it on a side, 5 needed" in during.note, during.note


def test_four_runs_a_side_use_a_test_of_independent_runs() -> None:
    fragile = [_run("dns", _p95(3.0 + 0.1 * i, seed=i), seed=i) for i in range(4)]
    tuned = [_run("dns", _p95(0.2 + 0.01 * i, seed=10 + i), seed=10 + i) for i in range(4)]
    during = _rows(compare_sets(fragile, tuned))[("app-p95-latency-over-time", "during")]
    assert during.verdict == "improved", during
    assert during.method.startswith("independent runs: one median a run, 4 vs 4")
    assert during.p_value is not None and during.p_value < 0.05
    assert (during.baseline.runs, during.tuned.runs) == (4, 4)


def test_one_value_a_run_gives_the_direction_and_the_runs_a_test_needs() -> None:
    fragile = _run("dns", _p95(3.0, seed=1), seed=1, recover_s=11.04)
    tuned = _run("dns", _p95(0.2, seed=2), seed=2, recover_s=0.04)
    row = _rows(compare_sets([fragile], [tuned]))[("time-to-recover-s", "")]
    assert row.verdict == "direction only"
    assert row.note == (
        "direction only: 11.04 → 0.04 (improved) in 1 run(s) vs 1; "
        "run --repeat 4 for a confident answer"
    )


def test_time_to_recover_within_one_check_is_no_change_at_the_resolution() -> None:
    """A hypothesis check that runs a 6 s load window cannot tell 6.42 s from 6.39 s."""

    def slow(seed: int, took: float) -> Run:
        b = JournalBuilder("rate limit", {"search-ok": True}, start=1.9e9 + seed * 1e4)
        b.check("before", "search-ok", True, 10, seconds=6.4)
        b.activity("limit", 20, 0.1)
        b.fault("dns-rate-limit", "netns:app", 20.1, 40)
        b.recovery(40, 60, took)
        return run_of(b.build(), f"j{seed}.json")

    rows = _rows(compare_sets([slow(1, 6.42)], [slow(2, 6.39)]))
    row = rows[("time-to-recover-s", "")]
    assert row.verdict == "no change", row
    assert "at the measurement's resolution: one check of the hypothesis takes 6.4 s" in row.note
    far = _rows(compare_sets([slow(1, 16.4)], [slow(2, 6.39)]))[("time-to-recover-s", "")]
    assert far.verdict == "direction only"


def _synthetic(seed: int, shift: float, runs: int, samples: int, noise: float) -> list[list[float]]:
    out = []
    for r in range(runs):
        rng = np.random.default_rng(seed * 100 + r)
        level = rng.normal(0, noise)
        walk = np.cumsum(rng.normal(0, 5, samples)) * 0.3  # autocorrelated, as a series is
        out.append([float(200 + shift + level + w + rng.normal(0, 20)) for w in walk])
    return out


def test_the_verdict_words_never_contradict_the_numbers() -> None:
    """Over effects, run counts, lengths and noise: a change is said only with an
    interval that excludes 0 (and, for independent runs, p < alpha); no p-value is
    ever given for a time series; "no change" never comes with an interval that
    excludes 0 and a separation of the windows."""
    settings = Settings(min_effect=0.05)
    seen: set[str] = set()
    for seed in range(40):
        shift = (0, 5, 15, 40, -40, 120, -300)[seed % 7]
        runs, samples = (1, 2, 3, 4, 5)[seed % 5], (1, 3, 12, 40)[(seed // 5) % 4]
        base = _synthetic(seed, 0, runs, samples, noise=(0, 30)[seed % 2])
        tuned = _synthetic(seed + 50, shift, runs, samples, noise=(0, 30)[seed % 2])
        c = compare_metric("latency-ms", base, tuned, ("lower", "tolerance"), False, settings)
        seen.add(c.verdict)
        excludes = c.ci is not None and (c.ci[0] > 0 or c.ci[1] < 0)
        if c.verdict in ("improved", "regressed"):
            assert excludes, c
            assert (c.verdict == "improved") == (c.difference < 0), c
            if c.p_value is not None:
                assert c.p_value < settings.alpha, c
        if c.p_value is not None:
            assert c.method.startswith("independent runs"), c
        if c.method.startswith("time series"):
            assert c.p_value is None, c
        if c.verdict == "no change" and c.ci is not None and c.p_value is None:
            assert not (excludes and c.separated), c
        if c.verdict == "direction only":
            assert c.runs_needed == 4 or runs > 1, c
    assert {"improved", "regressed", "no change", "direction only", "too short"} <= seen, seen


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


def _ratio(level: float, seed: int) -> Probe:
    points = [(float(t), level if t >= FAULT_AT else 0.0) for t in range(5, 80)]
    return Probe("app-error-ratio-over-time", points, RATIO_EXPR)


def _write(folder: Path, journals: list[dict]) -> None:
    folder.mkdir(parents=True)
    for i, journal in enumerate(journals):
        (folder / f"journal-{i}.json").write_text(json.dumps(journal))


def _side(title: str, p95: float, ratio: float, seeds: range, recover: float) -> list[dict]:
    return [
        window_journal(
            title,
            start=1.9e9 + s * 1e4,
            fault_at=FAULT_AT,
            fault_s=FAULT_S,
            probes=[_p95(p95, s), _ratio(ratio, s)],
            recover_s=recover,
        )
        for s in seeds
    ]


def test_cli_writes_one_section_per_experiment_and_can_fail_on_regression(tmp_path: Path) -> None:
    _write(tmp_path / "base", _side("dns saturation", 0.2, 0.0, range(2), 0.04))
    _write(tmp_path / "tuned", _side("dns saturation", 3.0, 1.0, range(10, 12), 11.0))
    ledger = tmp_path / "ledger.sqlite3"
    out = run_gameday(
        tmp_path,
        ledger,
        "compare",
        "base",
        "tuned",
        "-o",
        "cmp",
        "--offline",
        "--fail-on-regression",
    )
    assert out.returncode == 1, out.stderr
    lines = out.stderr.splitlines()
    assert lines[0] == "hypotheses held: 2 of 2 (baseline) → 2 of 2 (tuned)", lines
    assert "dns saturation:" in lines
    row = next(x for x in lines if x.startswith("  app-error-ratio-over-time, during the faults"))
    assert row.startswith(
        "  app-error-ratio-over-time, during the faults: regressed (0 % → 100 %, +100 pts"
    ), row
    assert "time series, 2 run(s) vs 2" in row and "p=" not in row
    markdown = (tmp_path / "cmp" / "comparison.md").read_text()
    assert "## Experiment: dns saturation" in markdown
    assert "Baseline: 2 run(s) of 1 experiment(s) (2 each); tuned: 2 run(s)" in markdown
    assert "2 run(s) vs 2" in markdown  # the experiment's own count agrees with the header
    table = next(
        x for x in markdown.splitlines() if x.startswith("| app-p95-latency-over-time | during")
    )
    assert re.search(r"\| \*\*regressed\*\* \| 0\.2\d* s \| 2\.9\d* s \| \+2\.\d+ s", table), table
    html = (tmp_path / "cmp" / "comparison.html").read_text()
    assert "<script" not in html
    # the hypothesis probe, p95, error ratio, time to recover: each titled with the experiment
    assert html.count("— dns saturation</h3>") == 4


def test_cli_refuses_sets_without_a_shared_metric(tmp_path: Path) -> None:
    a, b = JournalBuilder("a", {"x": 0}), JournalBuilder("b", {"y": 0})
    a.check("before", "x", 0, 0)
    b.check("before", "y", 0, 0)
    (tmp_path / "a.json").write_text(json.dumps(a.build()))
    (tmp_path / "b.json").write_text(json.dumps(b.build()))
    out = run_gameday(tmp_path, tmp_path / "l.sqlite3", "compare", "a.json", "b.json", "-o", "o")
    assert out.returncode == 3
    assert "share no numeric metric" in out.stderr


def _unsteady(seed: int) -> dict:
    """A run whose before-method check failed: the method never ran."""
    b = JournalBuilder("dns saturation", {"app-answers": True}, start=2e9 + seed)
    b.check("before", "app-answers", False, 0)
    b.experiment["method"].append({"type": "action", "name": "inject"})  # never ran
    return b.build()


def test_unsteady_runs_take_no_part_and_report_folders_are_read(tmp_path: Path) -> None:
    """The demo's report folders keep their journals in run/ (and a copy in journals/);
    unsteady runs are left out and said so; the answer comes first."""
    for side, journals in (
        ("fragile", [*_side("dns saturation", 3.0, 1.0, range(3), 11.0), _unsteady(1)]),
        ("tuned", _side("dns saturation", 0.2, 0.0, range(20, 23), 0.04)),
    ):
        _write(tmp_path / side / "run", journals)
        _write(tmp_path / side / "journals", journals)
        (tmp_path / side / "report.html").write_text("<html></html>")
    out = run_gameday(tmp_path, tmp_path / "l.sqlite3", "compare", "fragile", "tuned", "-o", "c")
    assert out.returncode == 0, out.stderr
    assert "1 unsteady run(s) left out" in out.stderr
    lines = [x for x in out.stderr.splitlines() if not x.startswith(("note:", "1 unsteady"))]
    assert lines[0] == "hypotheses held: 3 of 3 (baseline) → 3 of 3 (tuned)", lines
    assert lines[1] == (
        "  dns saturation: held 3, unsteady 1 → held ×3 (held 3/3 → 3/3); "
        "app-error-ratio-over-time during the faults 100 % → 0 % (improved)"
    ), lines[1]
    md = (tmp_path / "c" / "comparison.md").read_text()
    assert "Left out: 1 baseline and 0 tuned unsteady run(s)" in md
    assert "Baseline: 3 run(s) of 1 experiment(s) (3 each)" in md  # run/, not run/ and journals/


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
        "description": "errors/s measured during the method",
        "steady-state-hypothesis": {"title": "answers", "probes": [holds]},
        "method": [probe],
        "rollbacks": [],
    }


def test_repeat_gives_compare_the_runs_to_decide(tmp_path: Path) -> None:
    """Real `gameday run` journals, one value a run: one run a side gives the direction
    and the runs a test needs; `run --repeat 4` a side (the fewest whose Mann-Whitney
    test can reach p < 0.05) gives improved, with the test's p-value."""
    ledger = tmp_path / "l.sqlite3"
    for side, errors in (("fragile", 10.0), ("tuned", 0.0)):
        (tmp_path / f"{side}.json").write_text(json.dumps(_errors_experiment(errors)))
        once = run_gameday(tmp_path, ledger, "run", f"{side}.json", "--journal-dir", f"{side}1")
        assert once.returncode == 0, once.stderr
        out = run_gameday(
            tmp_path, ledger, "run", f"{side}.json", "--repeat", "4", "--journal-dir", side
        )
        assert out.returncode == 0, out.stderr
    single = run_gameday(tmp_path, ledger, "compare", "fragile1", "tuned1", "-o", "c1")
    assert single.returncode == 0, single.stderr
    line = next(x for x in single.stderr.splitlines() if "app-dns-errors-per-second," in x)
    assert "during and after the method: direction only (10/s → 0/s" in line, line
    assert "10 → 0 (improved) in 1 run(s) vs 1; run --repeat 4" in line, line
    repeated = run_gameday(tmp_path, ledger, "compare", "fragile", "tuned", "-o", "c4")
    assert repeated.returncode == 0, repeated.stderr
    line = next(x for x in repeated.stderr.splitlines() if "app-dns-errors-per-second," in x)
    assert re.search(
        r": improved \(10/s → 0/s, -10/s \(-100\.0%\) \[-10/s, -10/s\], p=0\.0\d+;", line
    ), line
    assert "independent runs" in line
    assert "lower (name)" in (tmp_path / "c4" / "comparison.md").read_text()
