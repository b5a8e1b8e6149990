"""Reading, comparing, gating and drawing envelopes (documents made by the real search core)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.envelopes import threshold, write_envelope

from chaos_ext._products.envelope.chart import envelope_svg
from chaos_ext._products.envelope.view import (
    EnvelopeError,
    check_floor,
    envelope_paths,
    load_envelope,
    movement,
    pair_envelopes,
    parse_floor,
)

LATENCY = {"vary": "delay-app-to-db.delay_ms=10..800", "resolution": 10, "repeats": 2}


def test_the_movement_reads_like_the_issue(tmp_path: Path) -> None:
    fragile = load_envelope(write_envelope(tmp_path / "fragile", threshold(47), LATENCY))
    tuned = load_envelope(write_envelope(tmp_path / "tuned", threshold(402), LATENCY))
    moved = movement(fragile, tuned)
    assert moved.verdict == "improved"
    lo, hi = sorted((fragile.envelope.held, fragile.envelope.deviated))  # type: ignore[type-var]
    assert lo < 47 <= hi and hi - lo <= 10
    assert moved.text.startswith(f"breaks between {lo:g} and {hi:g} ms (fragile) → between ")
    assert moved.text.endswith(" ms (tuned)")
    assert "fragile: held 3/3 at" in moved.backing and "tuned: held 3/3 at" in moved.backing
    assert movement(tuned, fragile).verdict == "regressed"
    again = load_envelope(write_envelope(tmp_path / "again", threshold(50), LATENCY))
    assert movement(fragile, again).verdict == "no change"


def test_a_noisy_side_counts_only_where_its_runs_agree(tmp_path: Path) -> None:
    visits: dict[float, int] = {}

    def noisy(m: float, n: int) -> str:  # below 60, every second run at a magnitude breaks
        visits[m] = visits.get(m, 0) + 1
        if 40 <= m < 60:
            return "deviated" if visits[m] % 2 == 0 else "held"
        return threshold(60)(m, n)

    base = load_envelope(write_envelope(tmp_path / "base", noisy, LATENCY))
    assert base.envelope.kind == "noisy"
    held, broke = base.robust_interval()  # what the runs show whatever the noise
    assert held < 40 and broke >= 60
    far = load_envelope(write_envelope(tmp_path / "far", threshold(402), LATENCY))
    moved = movement(base, far)
    assert moved.verdict == "improved" and "[noisy]" in moved.text
    near = load_envelope(write_envelope(tmp_path / "near", threshold(50), LATENCY))
    assert near.envelope.kind == "boundary"
    assert movement(base, near).verdict == "inconclusive"
    assert movement(near, base).verdict == "inconclusive"


@pytest.mark.parametrize(
    ("floor", "passed", "reason"),
    [
        (300, True, "holds at 300 ms: held at "),
        (400, False, "breaking point below the floor 400 ms"),
        (10, True, "held at"),
    ],
)
def test_floor_checks(tmp_path: Path, floor: float, passed: bool, reason: str) -> None:
    view = load_envelope(write_envelope(tmp_path / "e", threshold(350), LATENCY))
    check = check_floor(view, floor)
    assert check.passed is passed and reason in check.text


def test_a_floor_inside_the_boundary_interval_fails_closed(tmp_path: Path) -> None:
    view = load_envelope(write_envelope(tmp_path / "e", threshold(350), LATENCY))
    assert view.envelope.held is not None and view.envelope.deviated is not None
    inside = (view.envelope.held + view.envelope.deviated) / 2
    check = check_floor(view, inside)
    assert not check.passed and "inside the boundary interval" in check.text


def test_floors_with_direction_down(tmp_path: Path) -> None:
    headroom = {
        "vary": "take-slots.target=0..20",
        "format": "max-minus-{}",
        "direction": "down",
        "unit": "free connections",
        "repeats": 1,
    }
    view = load_envelope(write_envelope(tmp_path / "h", threshold(3, "down"), headroom))
    assert view.summary == "breaks between 3 and 4 free connections"
    assert view.runs[0]["value"] == "max-minus-20"
    assert check_floor(view, 4).passed and check_floor(view, 10).passed
    assert not check_floor(view, 3).passed


def test_the_breaks_at_the_mild_end_and_holds_answers(tmp_path: Path) -> None:
    broke = load_envelope(write_envelope(tmp_path / "b", threshold(5), LATENCY))
    holds = load_envelope(write_envelope(tmp_path / "h", threshold(5000), LATENCY))
    assert broke.phrase() == "breaks already at 10 ms"
    assert holds.phrase() == "holds up to 800 ms"
    assert movement(broke, holds).text == ("breaks already at 10 ms (b) → holds up to 800 ms (h)")
    assert not check_floor(broke, 10).passed
    assert check_floor(holds, 800).passed
    assert "the search stopped at 800 ms" in check_floor(holds, 900).text


def test_the_conclusion_is_recomputed_never_trusted(tmp_path: Path) -> None:
    path = write_envelope(tmp_path / "e", threshold(350), LATENCY)
    doc = json.loads(path.read_text())
    doc["result"] = {"kind": "holds-to-harsh-end", "summary": "holds up to 800 ms"}
    doc["runs"][-1]["outcome"] = "held"  # a repeat at the deviated side now disagrees
    path.write_text(json.dumps(doc))
    view = load_envelope(path)
    assert view.envelope.kind == "noisy" and "runs disagree" in view.summary


def test_malformed_envelopes_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "gameday-envelope", "settings": {}}')
    with pytest.raises(EnvelopeError, match="malformed envelope"):
        load_envelope(bad)
    journal = tmp_path / "journal.json"
    journal.write_text('{"experiment": {}}')
    with pytest.raises(EnvelopeError, match="not an envelope"):
        load_envelope(journal)


def test_inputs_are_split_into_envelopes_and_journals(tmp_path: Path) -> None:
    write_envelope(tmp_path / "all" / "dns", threshold(20), {"vary": "h.connections=1..40"})
    write_envelope(tmp_path / "all" / "db", threshold(350), LATENCY)
    journal = tmp_path / "journal.json"
    journal.write_text('{"experiment": {}}')
    found, others = envelope_paths([str(tmp_path / "all"), str(journal)])
    assert [p.parent.name for p in found] == ["db", "dns"]
    assert others == [str(journal)]
    found, others = envelope_paths([str(tmp_path / "all" / "dns" / "envelope.json")])
    assert len(found) == 1 and not others


def test_pairing_is_by_varied_argument(tmp_path: Path) -> None:
    a = load_envelope(
        write_envelope(tmp_path / "a", threshold(20), {"vary": "h.connections=1..40"})
    )
    b = load_envelope(write_envelope(tmp_path / "b", threshold(350), LATENCY))
    c = load_envelope(
        write_envelope(tmp_path / "c", threshold(30), {"vary": "h.connections=1..40"})
    )
    pairs, unmatched = pair_envelopes([a, b], [c])
    assert [(x.label, y.label) for x, y in pairs] == [("a", "c")]
    assert [v.label for v in unmatched] == ["b"]


def test_floor_syntax() -> None:
    assert parse_floor("delay_ms=200") == ("delay_ms", 200.0)
    assert parse_floor("delay-app-to-db.delay_ms=2.5") == ("delay-app-to-db.delay_ms", 2.5)
    for bad in ("delay_ms", "=200", "delay_ms=fast"):
        with pytest.raises(ValueError, match="ARGUMENT=MAGNITUDE"):
            parse_floor(bad)


def test_the_chart_draws_markers_band_and_boundary(tmp_path: Path) -> None:
    view = load_envelope(write_envelope(tmp_path / "e", threshold(350), LATENCY))
    svg = envelope_svg([view])
    assert svg.startswith("<svg")
    for text in ("p95-ms", "tolerance", "boundary", "held", "deviated", "3 held", "3 deviated"):
        assert text in svg, text
    other = load_envelope(write_envelope(tmp_path / "o", threshold(500), LATENCY))
    both = envelope_svg([view, other])
    assert "boundary (o)" in both and "held (e)" in both
