"""The report's incident section: errors by cause with onset, the breaking point, the
amplification, and the fragile/tuned figures line, from journals built by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.journals import JournalBuilder

from chaos_ext._products.report.incident_compare import figures, figures_line, read_side
from chaos_ext._products.report.model import view_of
from chaos_ext._products.report.render import render_html, render_markdown

ONSET = {
    "ledger_id": "abc",
    "scheduled": 1000,
    "errors": 400,
    "peak_rate": 60.0,
    "classes": [
        {
            "error_class": "dns",
            "count": 300,
            "share": 0.75,
            "onset_offset_seconds": 28.0,
            "onset_rate": 31.0,
        },
        {
            "error_class": "db-refused",
            "count": 100,
            "share": 0.25,
            "onset_offset_seconds": 11.0,
            "onset_rate": 15.0,
        },
    ],
    "breaking_point": {
        "offset_seconds": 11.0,
        "rate": 15.0,
        "error_ratio": 0.04,
        "p95_ms": 130.0,
        "crossed": ["error_ratio"],
    },
    "held_to_rate": None,
}


def _journal(title: str, onset: dict[str, Any] | None, rtts: tuple[float, float] | None) -> Any:
    j = JournalBuilder(title, {"ok": {"type": "range", "range": [0, 0.01]}})
    j.check("before", "ok", 0.0, 1)
    if onset is not None:
        j.activity("errors-by-cause-with-onset", 70, 0.1, onset, kind="probe")
    if rtts is not None:
        j.activity("rtt-before", 10, 0.1, {"median_ms": rtts[0]}, kind="probe")
        j.activity("rtt-during", 30, 0.1, {"median_ms": rtts[1]}, kind="probe")
        j.activity("resp-before", 60, 0.1, {"p50_ms": 40.0}, kind="probe")
        j.activity("resp-during", 61, 0.1, {"p50_ms": 1540.0}, kind="probe")
        j.experiment["extensions"] = [
            {
                "name": "incident",
                "amplification": {
                    "response_before": "resp-before",
                    "response_during": "resp-during",
                    "rtt_before": "rtt-before",
                    "rtt_during": "rtt-during",
                },
            }
        ]
    j.check("after", "ok", 0.4, 80)
    journal = j.build()
    for run in journal["run"]:
        if run["activity"]["name"] == "errors-by-cause-with-onset":
            run["activity"]["provider"] = {
                "type": "python",
                "module": "chaos_ext.load.probes",
                "func": "error_onset",
            }
    return journal


def test_the_summary_shows_each_class_with_its_onset_load_and_share() -> None:
    view = view_of(_journal("Incident 1", ONSET, None))
    md = render_markdown([view], "incidents")
    assert "### Errors by cause, with onset" in md
    assert "| dns | 300 | 75.0 % | 31 req/s | +28 s |" in md
    assert "| db-refused | 100 | 25.0 % | 15 req/s | +11 s |" in md
    assert "SLO: breaks at 15 req/s (error ratio over the SLO)." in md
    html = render_html([view], "incidents")
    assert "<td>db-refused</td><td>100</td><td>25.0 %</td><td>15 req/s</td>" in html


def test_the_amplification_is_added_response_over_added_rtt() -> None:
    # (1540 - 40) / (250.5 - 0.5) = 6
    view = view_of(_journal("Incident 3", None, (0.5, 250.5)))
    assert view.incident is not None and view.incident.amplification is not None
    assert view.incident.amplification["value"] == 6.0
    assert "Latency: amplification 6: the median response went from 40.0 ms to 1540.0 ms" in (
        render_markdown([view], "incidents")
    )
    # no added round trip: said so, no figure
    flat = view_of(_journal("Incident 3", None, (0.5, 0.5)))
    assert flat.incident is not None and flat.incident.amplification is not None
    assert flat.incident.amplification["value"] is None
    assert "no round-trip time" in flat.incident.amplification["why"]


def test_a_run_without_an_incident_has_no_section() -> None:
    view = view_of(_journal("plain", None, None))
    assert view.incident is None
    assert "Errors by cause" not in render_markdown([view], "plain")


def test_the_figures_line_of_fragile_vs_tuned(tmp_path: Path) -> None:
    held = {**ONSET, "errors": 0, "classes": [], "breaking_point": None, "held_to_rate": 60.0}
    stall = {**ONSET, "scheduled": 800, "errors": 200}
    sides = {
        "fragile": [
            ("01-eks-load-test", ONSET, None),
            ("02-nodelocal-dns-stall", stall, None),
            ("03-app-db-latency", held, (0.5, 250.5)),
        ],
        "tuned": [("01-eks-load-test", held, None), ("02-nodelocal-dns-stall", held, None)],
    }
    for side, runs in sides.items():
        folder = tmp_path / side
        folder.mkdir()
        for stem, onset, rtts in runs:
            journal = _journal(stem, onset, rtts)
            (folder / f"journal-{stem}.json").write_text(json.dumps(journal))
    values = figures(
        read_side("fragile", tmp_path / "fragile"), read_side("tuned", tmp_path / "tuned")
    )
    assert figures_line(values) == (
        "incidents eks_break_fragile_rps=15 eks_break_tuned_rps=60 nodelocal_errors_fragile=0.25"
        " nodelocal_errors_tuned=0 latency_amplification=6"
    )
