"""One timeline per run (chaos_ext._core.timeline): built once by `gameday run` and stored in
the journal, rebuilt for older journals; each check in the window of what was open then.

The oracles read the raw journal (chaoslib's times, the ledger's created_at/closed_at),
never the product's own rule.
"""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.gameday_cli import TESTS, run_gameday
from support.journals import T0, JournalBuilder

from chaos_ext._core.timeline import (
    ACTIONS_KIND,
    REBUILT_NOTE,
    EntrySpan,
    build_timeline,
    figure_of,
    substitute,
    timeline_from_dict,
    timeline_of,
    window_at,
)
from chaos_ext._products.report.model import view_of
from chaos_ext._products.report.render import render_markdown

OLD_JOURNAL = TESTS / "fixtures" / "journals" / "load-then-fault-main-048410c.json"
"""A journal written by main's `gameday run` at commit 048410c, before runs recorded a timeline:
the load-then-fault experiment of tests/reporting/conftest.py, run with
``--hypothesis-strategy continuously --hypothesis-frequency 0.5`` against the test HTTP target."""

SLACK_S = 0.05  # the runner's marks and chaoslib's times are taken microseconds apart


def _t(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def _checks(journal: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """``(chaoslib phase, probe, run)`` of every hypothesis check of a journal, raw."""
    found = []
    for phase in ("before", "during", "after"):
        block = journal["steady_states"][phase]
        for state in block if isinstance(block, list) else [block] if block else []:
            found += [(phase, p["activity"]["name"], p) for p in state["probes"]]
    return found


def _held_port(journal: dict[str, Any]) -> tuple[float, float]:
    entry = next(e for e in journal["gameday"]["ledger"] if e["kind"] == "test-port")
    return entry["created_at"], entry["closed_at"]


def test_the_runner_stores_the_timeline_every_output_reads(load_then_fault: Any) -> None:
    journal = load_then_fault.load()
    stored = journal["gameday"]["timeline"]
    timeline = timeline_of(journal)
    assert timeline == timeline_from_dict(stored)
    assert timeline.source == "recorded" and timeline.notes == ()
    assert build_timeline(journal) == timeline  # the same journal gives the same timeline
    names = [p.name for p in timeline.phases]
    assert names == ["before", "method", "after", "rollbacks", "sweep", "recovery"]
    assert all(a.end is not None and a.start <= a.end for a in timeline.phases)
    assert all(
        a.end <= b.start + SLACK_S
        for a, b in zip(timeline.phases, timeline.phases[1:], strict=False)
    )
    assert journal["gameday"]["text_vars"] == {
        "port": journal["experiment"]["configuration"]["port"],
        "rate": 20,
    }


def test_loads_are_never_fault_time(load_then_fault: Any) -> None:
    journal = load_then_fault.load()
    timeline = timeline_of(journal)
    on, off = _held_port(journal)
    loads = [e for e in journal["gameday"]["ledger"] if e["kind"] == "http-load"]
    assert len(loads) >= 2  # the hypothesis' own baseline load, then the method's
    assert {e.id for e in timeline.loads()} == {e["id"] for e in loads}
    assert [e.kind for e in timeline.faults()] == ["test-port"]
    window = timeline.fault_window()
    assert window is not None and (window.start, window.end) == (on, off)
    assert min(e["created_at"] for e in loads) < on  # a load was on long before the fault


def test_each_check_is_in_the_window_of_what_was_open(load_then_fault: Any) -> None:
    journal = load_then_fault.load()
    on, off = _held_port(journal)
    rollbacks = min(_t(r["start"]) for r in journal["rollbacks"])
    expected: dict[tuple[str, float], str] = {}
    for phase, probe, run in _checks(journal):
        end = _t(run["end"])
        if end < on:
            expected[(probe, end)] = "before"
        elif end <= off:
            expected[(probe, end)] = "faults-on" if phase == "after" else "during"
        if phase == "after":
            assert end < rollbacks < off  # Chaos Toolkit's after runs with the fault still on
    for check in journal["gameday"]["recovery"]["checks"]:
        assert check["at"] > off
        expected[(check["probe"], check["at"])] = "after-undo"
    found = {(m.probe, m.at): m.window for m in timeline_of(journal).measurements if m.hypothesis}
    assert found == expected
    assert set(expected.values()) == {"before", "during", "faults-on", "after-undo"}


def test_the_figure_is_what_the_tolerance_judges(load_then_fault: Any) -> None:
    journal = load_then_fault.load()
    by_check = {(m.probe, m.at): m for m in timeline_of(journal).measurements}
    for _, probe, run in _checks(journal):
        m = by_check[(probe, _t(run["end"]))]
        output = run["output"]
        if probe == "load-error-ratio":  # a mapping judged on one key (target error_ratio)
            assert m.value == output["error_ratio"]
            assert m.text == f"error_ratio {output['error_ratio']:.4g}"
        elif probe == "port-closed":  # a bool
            assert m.value == (1.0 if output else 0.0) and m.text == str(output).lower()
        else:
            assert m.value == output
        assert m.tolerance_met is run["tolerance_met"]


def test_each_pause_is_on_the_timeline(load_then_fault: Any) -> None:
    journal = load_then_fault.load()
    activities = {a.name: a for a in timeline_of(journal).activities}
    load = activities["load-at-${rate}-per-second"]
    hold = activities["hold-the-port"]
    marks = {  # what the runner saw, as it happened
        m["activity"]: (m["start"], m["end"])
        for m in journal["gameday"]["phases"]
        if m["name"] == "pause" and m["which"] == "after"
    }
    assert marks == {load.name: load.pause_after, hold.name: hold.pause_after}
    assert load.end is not None and abs(load.pause_after[0] - load.end) <= SLACK_S
    assert load.pause_after[1] - load.pause_after[0] == pytest.approx(1.5, abs=0.3)
    assert hold.pause_after[1] - hold.pause_after[0] == pytest.approx(1.0, abs=0.3)
    assert load.pause_after[1] <= hold.start + SLACK_S  # the next activity starts after it


def test_a_journal_written_before_timelines_is_rebuilt_with_a_note(tmp_path: Path) -> None:
    journal = json.loads(OLD_JOURNAL.read_text())
    assert "timeline" not in journal["gameday"] and "phases" not in journal["gameday"]
    timeline = timeline_of(journal)
    assert timeline.source == "rebuilt" and timeline.notes == (REBUILT_NOTE,)
    on, _ = _held_port(journal)
    assert [e.kind for e in timeline.faults()] == ["test-port"]
    assert timeline.window("before") is not None
    assert timeline.window("before").end == on  # type: ignore[union-attr]
    windows = {m.window for m in timeline.measurements}
    assert windows == {"before", "during", "faults-on"}  # no recovery checks were kept then
    after = [m for m in timeline.measurements if m.phase == "after"]
    assert after and all(m.window == "faults-on" for m in after)
    shutil.copy(OLD_JOURNAL, tmp_path / "old.json")
    out = run_gameday(tmp_path, tmp_path / "ledger.sqlite3", "report", "old.json", "-o", "r")
    assert out.returncode == 0, out.stderr
    summary = (tmp_path / "r" / "summary.md").read_text()
    assert REBUILT_NOTE in summary and "${" not in summary
    assert "| with faults on (steady state after the method, before the undo) |" in summary


@pytest.fixture(scope="module")
def actions_only(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real run whose method's action records nothing in the ledger (a process)."""
    tmp = tmp_path_factory.mktemp("actions-only")
    probe = {
        "type": "probe",
        "name": "nap-seconds",
        "tolerance": 0,
        "provider": {
            "type": "python",
            "module": "support.faultkit",
            "func": "nap",
            "arguments": {"seconds": 0},
        },
    }
    experiment = {
        "title": "a process action",
        "description": "an action outside gameday's ledger",
        "steady-state-hypothesis": {"title": "zero", "probes": [probe]},
        "method": [
            {
                "type": "action",
                "name": "touch-a-file",
                "provider": {"type": "process", "path": "true", "timeout": 10},
                "pauses": {"after": 0.5},
            }
        ],
        "rollbacks": [
            {"type": "action", "name": "undo", "provider": {"type": "process", "path": "true"}}
        ],
    }
    path = tmp / "actions.json"
    path.write_text(json.dumps(experiment))
    out = run_gameday(
        tmp,
        tmp / "ledger.sqlite3",
        "run",
        "--settle",
        "5",
        "--journal",
        str(tmp / "j.json"),
        str(path),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    loaded: dict[str, Any] = json.loads((tmp / "j.json").read_text())
    return loaded


def test_actions_outside_the_ledger_are_one_fault_until_the_rollbacks_and_settle_is_marked(
    actions_only: dict[str, Any],
) -> None:
    journal = actions_only
    timeline = timeline_of(journal)
    (fault,) = timeline.faults()
    assert fault.kind == ACTIONS_KIND and fault.target == "touch-a-file"
    assert fault.on == _t(journal["run"][0]["start"])
    rollbacks = timeline.phase("rollbacks")
    assert rollbacks is not None and fault.off == rollbacks.end
    assert rollbacks.end >= _t(journal["rollbacks"][-1]["end"]) - SLACK_S
    windows = [m.window for m in timeline.measurements]
    assert windows[0] == "before" and "faults-on" in windows and windows[-1] == "after-undo"
    names = [p.name for p in timeline.phases]
    assert names == ["settle", "before", "method", "after", "rollbacks", "sweep", "recovery"]
    settle, before = timeline.phases[:2]
    assert settle.end == before.start  # chaoslib's own check begins as settling ends
    first_check = min(_t(run["start"]) for _, _, run in _checks(journal))
    assert settle.end is not None and abs(settle.end - first_check) <= SLACK_S
    assert any("count as faults" in n for n in timeline.notes)


def test_window_rule_is_over_what_was_open() -> None:
    fault = EntrySpan("f", "netem", "eth0", "fault", 10.0, 20.0)
    load = EntrySpan("l", "http-load", "x", "load", 0.0, 30.0)
    assert window_at(5, "during", [fault, load]) == "before"  # a load alone is no fault
    assert window_at(10, "during", [fault, load]) == "during"
    assert window_at(15, "probe", [fault]) == "during"
    assert window_at(15, "after", [fault]) == "faults-on"
    assert window_at(25, "after", [fault]) == "after-undo"  # undone before the check
    assert window_at(25, "recovery", [fault]) == "after-undo"
    still_on = EntrySpan("f", "netem", "eth0", "fault", 10.0, None)
    assert window_at(1e12, "recovery", [still_on]) == "faults-on"
    assert window_at(5, "before", [load]) == "before"
    assert window_at(5, "after", [load]) == "no-faults"


@pytest.mark.parametrize(
    ("output", "tolerance", "figure"),
    [
        (0.25, {"type": "range", "range": [0, 1]}, 0.25),
        (True, True, 1.0),
        (
            {"error_ratio": 0.973, "achieved_rate": 15.0},
            {"type": "range", "target": "error_ratio", "range": [0, 0.01]},
            0.973,
        ),
        ({"passed": False, "n": 3}, {"type": "jsonpath", "path": "$.passed", "expect": True}, 0.0),
        ({"drifted_pods": 2}, {"type": "jsonpath", "path": "$.drifted_pods", "expect": 0}, 2.0),
        ({"status": 503, "body": "x"}, 200, 503.0),
        ({"p99_ms": 12.5}, {"type": "range", "target": "${key}", "range": [0, 100]}, 12.5),
        ({"a": 1}, {"type": "range", "range": [0, 1]}, None),  # no figure: never a JSON dump
        ("up", "up", None),
        (float("nan"), 0, None),
    ],
)
def test_the_figure_of_each_kind_of_tolerance(output: Any, tolerance: Any, figure: Any) -> None:
    assert figure_of(output, tolerance, {"key": "p99_ms"}) == figure


def test_texts_are_substituted_from_what_the_run_loaded() -> None:
    assert substitute("capped at ${pps}/s on ${where}", {"pps": 50}) == "capped at 50/s on ${where}"
    assert substitute("${rate} a second", {"rate": 15.0}) == "15 a second"


def test_stops_and_cut_short_activities_are_on_the_timeline() -> None:
    b = JournalBuilder("stopped", {"errors": {"type": "range", "range": [0, 0.05]}})
    b.check("before", "errors", 0.01, 0)
    b.activity("inject", 1, 4.0, {"ledger_id": "x"})
    b.fault("netem", "eth0", 1.2, 5.5)
    journal = b.build(status="aborted")
    journal["gameday"]["stops"] = [
        {
            "cause": "stop-condition",
            "at": T0 + 3.0,
            "effect": "stopped the run",
            "fired_at": T0 + 2.6,
            "what": "HighErrorRate",
            "phase": "method",
        },
        {
            "cause": "SIGTERM",
            "at": T0 + 5.0,
            "effect": "noted: already stopping",
            "phase": "rollbacks",
        },
    ]
    timeline = build_timeline(journal)
    assert [(s.cause, s.fired_at) for s in timeline.stops] == [
        ("stop-condition", T0 + 2.6),
        ("SIGTERM", None),
    ]
    (inject,) = timeline.activities
    assert inject.status == "cut-short" and inject.cut_short_after_s == pytest.approx(4.0)
    del journal["gameday"]["stops"]
    journal["gameday"]["abort"] = {"fired": {"condition": "edge", "at_unix": T0 + 3.0}}
    (stop,) = build_timeline(journal).stops
    assert (stop.cause, stop.at, stop.what) == ("stop-condition", T0 + 3.0, "edge")


@pytest.mark.parametrize(
    "damage",
    [
        {"steady_states": {"before": "x", "after": [1, None], "during": {"a": 1}}},
        {"run": [{"activity": None, "start": 5, "end": "not a time"}, "junk"]},
        {"gameday": {"ledger": [{"created_at": "soon", "kind": 3}], "phases": "nope"}},
        {"gameday": {"recovery": {"checks": [{"at": None}, "junk", {"at": 1.0, "value": "x"}]}}},
        {"gameday": {"timeline": {"start": "broken"}}},
        {"start": None, "end": None, "experiment": {"configuration": [1, 2]}},
    ],
)
def test_an_odd_journal_never_breaks_the_timeline(damage: dict[str, Any]) -> None:
    b = JournalBuilder("odd", {"errors": 0})
    b.check("before", "errors", 0, 0)
    journal = {**b.build(), **damage}
    timeline = timeline_of(journal)
    assert timeline.source == "rebuilt"


def test_the_console_names_the_windows_and_says_the_recovery_once(load_then_fault: Any) -> None:
    out = load_then_fault.stdout
    assert "▶ steady state before (baseline)" in out
    assert "steady state met (before the faults)" in out
    assert "▶ with faults on (steady state after the method, before the undo)" in out
    assert "steady state NOT met (with the faults on): port-closed = true" in out
    assert out.count("recovered ") == 1, out  # live, as the check ends; not again at the end
    probes = [line for line in out.splitlines() if "probe load-error-ratio" in line]
    assert probes and all(re.search(r"\) error_ratio [-0-9.e]+$", line) for line in probes), probes
    # a load probe's own figure, not its whole summary cut short


def test_a_probe_that_held_again_after_the_undo_is_not_red_there() -> None:
    b = JournalBuilder("recovers", {"errors": {"type": "range", "range": [0, 0.01]}})
    b.check("before", "errors", 0.0, 0)
    b.activity("inject", 1, 0.1, {"ledger_id": "0000000000000000"})
    b.fault("netem", "eth0", 1.0, 9.0)
    b.check("after", "errors", 0.5, 8)
    b.recovery(9.0, 60, 3.0)
    journal = b.build()
    journal["gameday"]["recovery"]["checks"] = [
        {
            "probe": "errors",
            "at": T0 + 9.5 + i,
            "value": v,
            "text": f"{v:g}",
            "tolerance_met": v == 0,
        }
        for i, v in enumerate((0.5, 0.2, 0.0))
    ]
    summary = render_markdown([view_of(journal)], "t")
    row = next(line for line in summary.splitlines() if line.startswith("| errors"))
    assert row.endswith("| held again at check 3 (2 out of tolerance before, from 0 to 0.5) ✓ |")
    assert "out of tolerance with the faults on (see the cells marked ✗)" in summary
    assert "after the undo (see" not in summary
