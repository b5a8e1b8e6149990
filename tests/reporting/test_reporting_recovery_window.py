"""The recovery window on the report's and the comparison's time-series charts.

The runs are real (`gameday run` on small experiments: a held port in the
ledger, a hypothesis probe of tests/support/verdictkit.py that answers slowly,
or wrongly, once the method ran), so the window is checked against the instants
the real runner wrote (``gameday.recovery.undone_at``, ``time_to_recover_s``,
``seconds``). The comparison's journals are synthetic with known instants
(tests/support/journals.py). The SVG is read back through the axes' tick marks
(tests/support/svgchart.py), independently of the product.
"""

from __future__ import annotations

import json
import re
import socket
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.gameday_cli import run_gameday
from support.journals import T0, JournalBuilder
from support.svgchart import axes_span, group, spans, svgs, texts

SLACK_S = 0.12  # a few pixels of the real runs' ~10 s axes
RECOVERY = "-recovery-window"
SLOW_CHECK_S = 1.5  # the recovering run's probe answers this slowly once the method ran
BOUND_S = 2  # the not-recovering run's recover_seconds


def _py(name: str, module: str, func: str, kind: str = "probe", **arguments: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "name": name,
        "provider": {"type": "python", "module": module, "func": func, "arguments": arguments},
    }


def _experiment(title: str, ran: Path, recover_s: float, **answers: Any) -> dict[str, Any]:
    """Holds a port (a ledger fault, undone by the rollback), marks ``ran``; the hypothesis
    probe ``answers`` behaves as ``answers`` says once ``ran`` exists."""
    probe = _py("answers", "support.verdictkit", "behave", when="after", ran=str(ran), **answers)
    probe["tolerance"] = True
    port = free_port()
    return {
        "title": title,
        "description": "a held port and a hypothesis that changes once the method ran",
        "extensions": [{"name": "gameday", "recover_seconds": recover_s}],
        "steady-state-hypothesis": {"title": "it answers", "probes": [probe]},
        "method": [
            _py("hold", "support.faultkit", "hold_port", kind="action", port=port, seconds=60),
            _py("mark", "support.verdictkit", "behave", kind="action", touch=str(ran)),
            _py("connects", "support.reportkit", "connect_series", port=port, count=4),
        ],
        "rollbacks": [_py("undo", "chaos_ext.faults.actions", "rollback_faults", kind="action")],
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def recovery_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Two real runs: one recovers after a slow check, one does not within its bound."""
    tmp = tmp_path_factory.mktemp("recovery")
    ledger = tmp / "ledger.sqlite3"
    experiments = {
        "slow": _experiment(
            "recovers slowly", tmp / "ran-slow", 10, mode="hang", seconds=SLOW_CHECK_S
        ),
        "broken": _experiment("never recovers", tmp / "ran-broken", BOUND_S, mode="fail"),
    }
    paths = []
    for name, experiment in experiments.items():
        paths.append(tmp / f"{name}.json")
        paths[-1].write_text(json.dumps(experiment))
    try:
        out = run_gameday(tmp, ledger, "run", "--journal-dir", str(tmp), *map(str, paths))
        assert out.returncode == 5, out.stdout + out.stderr  # not-recovered wins the batch
        yield {name: tmp / f"journal-{name}.json" for name in experiments}
    finally:
        run_gameday(tmp, ledger, "rollback")


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _experiment_charts(html: str, index: int) -> list[ET.Element]:
    """The time-series charts of the report's experiment ``index`` (1-based)."""
    sections = re.split(r'<section class="card experiment" id="experiment-(\d+)"', html)
    found = dict(zip(sections[1::2], sections[2::2], strict=True))
    return svgs(found[str(index)])


def _report(tmp: Path, *journals: Path) -> str:
    out = run_gameday(tmp, tmp / "ledger.sqlite3", "report", *map(str, journals), "-o", "r")
    assert out.returncode == 0, out.stdout + out.stderr
    return (tmp / "r" / "report.html").read_text()


def _fill(svg: ET.Element, suffix: str) -> str:
    """The fill colour of the shaded group ending with ``suffix``."""
    found = group(svg, suffix)
    assert found is not None, suffix
    styles = [e.get("style", "") for e in found.iter() if "fill:" in e.get("style", "")]
    colour = re.search(r"fill: (#[0-9a-f]{6})", styles[0]) if styles else None
    assert colour is not None, (suffix, styles)
    return colour.group(1)


def _assert_window(svg: ET.Element, start: float, end: float) -> None:
    """One rectangle from ``start`` to ``end`` (chart seconds), inside the x range, in a
    colour of its own."""
    (drawn,) = spans(svg, RECOVERY)
    assert abs(drawn[0] - start) <= SLACK_S and abs(drawn[1] - end) <= SLACK_S, (drawn, start, end)
    low, high = axes_span(svg)
    assert low <= drawn[0] and drawn[1] <= high + SLACK_S / 4, ((low, high), drawn)
    faults = {_fill(svg, f"-fault-{s}") for s in ("ledger", "action") if group(svg, f"-fault-{s}")}
    assert faults and _fill(svg, RECOVERY) not in faults, faults


def test_each_chart_of_a_run_draws_its_recovery_at_the_journals_instants(
    recovery_runs: dict[str, Path], tmp_path: Path
) -> None:
    journal = json.loads(recovery_runs["slow"].read_text())
    recovery = journal["gameday"]["recovery"]
    assert journal["gameday"]["outcome"] == "held" and recovery["recovered"], recovery
    took = recovery["time_to_recover_s"]
    assert took >= SLOW_CHECK_S, recovery  # one slow check: a window wide enough to measure
    origin = _epoch(journal["start"])
    start = recovery["undone_at"] - origin
    charts = _experiment_charts(_report(tmp_path, recovery_runs["slow"]), 1)
    assert len(charts) >= 2, "a chart per series: answers and connects"
    for svg in charts:
        _assert_window(svg, start, start + took)
        assert f"recovery {took:g} s" in texts(svg)
        # the same instant as the undo: the held port's ledger window ends where it starts
        assert abs(spans(svg, "-fault-ledger")[-1][1] - start) <= SLACK_S


def test_a_run_that_did_not_recover_is_shaded_to_the_end_of_its_bound(
    recovery_runs: dict[str, Path], tmp_path: Path
) -> None:
    journal = json.loads(recovery_runs["broken"].read_text())
    recovery = journal["gameday"]["recovery"]
    assert journal["gameday"]["outcome"] == "not-recovered", recovery
    assert recovery["recovered"] is False and recovery["seconds"] == BOUND_S
    start = recovery["undone_at"] - _epoch(journal["start"])
    charts = _experiment_charts(_report(tmp_path, recovery_runs["broken"]), 1)
    assert charts
    for svg in charts:
        _assert_window(svg, start, start + BOUND_S)
        assert f"not recovered within {BOUND_S} s" in texts(svg)
        assert not any(t.startswith("recovery ") for t in texts(svg))


def _plain(title: str) -> JournalBuilder:
    """A run with a fault and a numeric series, in the shape of tests/support/journals.py."""
    b = JournalBuilder(title, {"latency-ms": {"type": "range", "range": [0, 50]}})
    b.check("before", "latency-ms", 10, 1)
    b.activity("inject", 2, 0.5, {"ledger_id": "a"})
    b.fault("netem", "netns:app/eth0", 2.2, 8.0)
    b.check("after", "latency-ms", 12, 9)
    return b


def test_journals_without_recovery_data_draw_no_window(tmp_path: Path) -> None:
    """Older journals (and plain `chaos run`'s), recovery off, or a record without the
    undo's instant: no window, no crash; beside them, the same run with a record has one."""
    records: list[Any] = [
        None,
        {"seconds": 0.0, "checked": False, "why": "off (--recover 0)"},
        {"seconds": 60, "checked": True, "recovered": True, "time_to_recover_s": 3.0},
        {  # a signal ended the wait: the record of chaos_ext/_runner/recovery.py then
            "seconds": 60.0,
            "checked": False,
            "recovered": False,
            "undone_at": T0 + 8.0,
            "time_to_recover_s": None,
            "attempts": 2,
            "last": "out of tolerance: latency-ms",
            "why": "a signal ended the recovery check",
        },
        "garbage",
    ]
    paths = []
    for n, record in enumerate(records):
        journal = _plain(f"no window {n}").build()
        if record is not None:
            journal["gameday"]["recovery"] = record
        paths.append(tmp_path / f"old-{n}.json")
        paths[-1].write_text(json.dumps(journal))
    for name, took in (("recovered", 4.0), ("not-recovered", None)):
        measured = _plain(name)
        measured.recovery(8.0, 30, took)
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(measured.build()))
    html = _report(tmp_path, *paths)
    for index in range(1, len(records) + 1):
        for svg in _experiment_charts(html, index):
            assert group(svg, RECOVERY) is None, index
            assert not any("recover" in t for t in texts(svg)), index
            assert spans(svg, "-fault-ledger"), "the chart itself is drawn"
    (recovered,) = _experiment_charts(html, len(records) + 1)
    _assert_window(recovered, 8.0, 12.0)
    assert "recovery 4 s" in texts(recovered)
    (failed,) = _experiment_charts(html, len(records) + 2)
    _assert_window(failed, 8.0, 38.0)
    assert "not recovered within 30 s" in texts(failed)
    assert _fill(failed, RECOVERY) != _fill(recovered, RECOVERY)


def _compared_run(side: str, index: int, took: float | None, bound: float) -> dict[str, Any]:
    """A run settling ``delay`` s, a fault 0.2..15.2 s after its first action, undone at
    15.2 s, the hypothesis held again ``took`` s later (None: not within ``bound``)."""
    start = 1.9e9 + index * 1e3 + (0 if side == "baseline" else 1e5)
    delay = 20.0 + 7 * index
    b = JournalBuilder("synthetic recovery", {"app-answers": True}, start=start)
    b.check("before", "app-answers", True, delay - 1)
    b.activity("inject", delay, 0.5, {"ledger_id": "a"})
    b.fault("netem", "netns:app/eth0", delay + 0.2, delay + 15.2)
    points = [[start + delay + t, 1.0 if 0 <= t < 15 else 0.0] for t in range(-10, 40)]
    b.activity("errors-over-time", delay + 41, 0.2, {"series": points}, kind="probe")
    b.check("after", "app-answers", True, delay + 42)
    b.recovery(delay + 15.2, bound, took)
    return b.build()


def test_comparison_charts_draw_each_runs_window_after_the_undo(tmp_path: Path) -> None:
    """compare draws each run's samples window by window (gameday.timeline): the window
    after the undo runs from the undo to the recovery check's end (held again, or the
    bound), and the time to recover is compared as a row of its own."""
    sides = {"baseline": [(12.0, 60.0), (14.0, 60.0)], "tuned": [(3.0, 60.0), (None, 30.0)]}
    for side, runs in sides.items():
        (tmp_path / side).mkdir()
        for index, (took, bound) in enumerate(runs):
            journal = _compared_run(side, index, took, bound)
            (tmp_path / side / f"journal-{index}.json").write_text(json.dumps(journal))
    out = run_gameday(tmp_path, tmp_path / "l.sqlite3", "compare", "baseline", "tuned", "-o", "c")
    assert out.returncode == 0, out.stdout + out.stderr
    said = out.stdout + out.stderr
    assert "time-to-recover-s: direction only (13 s → 3 s" in said, said
    html = (tmp_path / "c" / "comparison.html").read_text()
    (svg,) = [s for s in svgs(html) if "errors-over-time — synthetic recovery" in texts(s)]
    for side, runs in sides.items():
        for index, (took, bound) in enumerate(runs, start=1):
            (drawn,) = spans(svg, f"-{side}-{index}-after-undo")
            last_sample = 39 - 0.2  # the series ends 39 s after the first action
            end = min(15.2 + (took if took is not None else bound), last_sample)
            # samples every second from the first after the undo (15.2 s) to the end
            assert abs(drawn[0] - 15.2) <= 1.0 and abs(drawn[1] - end) <= 1.0, (side, drawn)
