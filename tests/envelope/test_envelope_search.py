"""The envelope search's pure core against oracles whose breaking point is known.

These are the decisions only: which magnitude next, when to stop, what the
runs mean. The real runs (a real HTTP server, real dnsmasq) are in
test_envelope_dnsmasq.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import pytest

from chaos_ext._products.envelope.search import (
    Observation,
    Search,
    Space,
    Step,
    Stopped,
    agreement,
    conclude,
    describe,
    next_step,
    worst_case_runs,
)

Oracle = Callable[[float, int], str]  # (magnitude, run number) -> outcome


def threshold(t: float, direction: str = "up") -> Oracle:
    """Deviates at ``t`` and anything harsher."""
    if direction == "up":
        return lambda m, _n: "deviated" if m >= t else "held"
    return lambda m, _n: "deviated" if m <= t else "held"


def drive(search: Search, oracle: Oracle) -> tuple[list[Observation], Stopped | None]:
    observations: list[Observation] = []
    while True:
        step = next_step(search, observations)
        if step is None or isinstance(step, Stopped):
            return observations, step
        space = search.space
        assert space.low <= step.magnitude <= space.high, step
        observations.append(
            Observation(step.magnitude, oracle(step.magnitude, len(observations) + 1), step.phase)
        )
        assert len(observations) <= 200


def goal(low: float, high: float, resolution: float, repeats: int) -> int:
    return math.ceil(math.log2((high - low) / resolution)) + 2 + 2 * repeats


@pytest.mark.parametrize("true", [2, 3, 19, 20, 21, 39, 40])
def test_integer_threshold_is_found_exactly_within_the_goal(true: int) -> None:
    search = Search(Space(1, 40, 1, integer=True), repeats=2, max_runs=30)
    observations, stopped = drive(search, threshold(true))
    envelope = conclude(search, observations)
    assert stopped is None
    assert envelope.kind == "boundary"
    assert (envelope.held, envelope.deviated) == (true - 1, true)
    assert len(observations) <= goal(1, 40, 1, 2) == worst_case_runs(search)
    assert agreement(envelope) == f"held 3/3 at {true - 1}; deviated 3/3 at {true}"
    assert describe(envelope, search.space, "connections") == (
        f"breaks between {true - 1} and {true} connections"
    )


def test_worst_case_is_reached_and_never_exceeded() -> None:
    search = Search(Space(0, 100, 1, integer=True), repeats=1, max_runs=30)
    counts = [len(drive(search, threshold(t))[0]) for t in range(1, 101)]
    assert max(counts) == worst_case_runs(search) == goal(0, 100, 1, 1)


def test_float_range_absolute_resolution() -> None:
    search = Search(Space(10, 800, 5), repeats=2)
    observations, _ = drive(search, threshold(437.3))
    envelope = conclude(search, observations)
    assert envelope.kind == "boundary"
    assert envelope.held is not None and envelope.deviated is not None
    assert envelope.held < 437.3 <= envelope.deviated
    assert envelope.deviated - envelope.held <= 5
    assert len(observations) <= goal(10, 800, 5, 2)


def test_relative_resolution_bisects_geometrically() -> None:
    search = Search(Space(10, 800, 0.1, relative=True), repeats=1)
    for true in (42.0, 400.0, 777.0):
        observations, _ = drive(search, threshold(true))
        envelope = conclude(search, observations)
        assert envelope.held is not None and envelope.deviated is not None
        assert envelope.held < true <= envelope.deviated
        assert envelope.deviated - envelope.held <= 0.1 * envelope.deviated + 1e-9
        assert len(observations) <= worst_case_runs(search)
    # log2(log(80)/log(1/0.9)) ~ 5.4: 6 bisections, far fewer than (800-10)/(0.1*10)
    assert worst_case_runs(search) == 2 + 6 + 2


def test_direction_down_starts_at_high_and_never_goes_below_low() -> None:
    # fewer free connections is harsher: breaks at 3 free or fewer
    search = Search(Space(0, 20, 1, integer=True, direction="down"), repeats=1)
    observations, _ = drive(search, threshold(3, "down"))
    assert observations[0].magnitude == 20 and observations[1].magnitude == 0
    envelope = conclude(search, observations)
    assert (envelope.held, envelope.deviated) == (4, 3)
    assert describe(envelope, search.space, "free") == "breaks between 3 and 4 free"


def test_breaks_already_at_the_mild_end_never_runs_the_harsh_end() -> None:
    search = Search(Space(10, 800, 10), repeats=2)
    observations, _ = drive(search, threshold(5))
    assert [o.magnitude for o in observations] == [10, 10, 10]
    envelope = conclude(search, observations)
    assert envelope.kind == "breaks-at-mild-end"
    assert describe(envelope, search.space, "ms") == (
        "breaks already at 10 ms (the mildest magnitude tried)"
    )
    assert agreement(envelope) == "deviated 3/3 at 10"


def test_holds_up_to_the_harsh_end() -> None:
    search = Search(Space(10, 800, 10), repeats=2)
    observations, _ = drive(search, threshold(5000))
    assert [o.magnitude for o in observations] == [10, 800, 800, 800]
    envelope = conclude(search, observations)
    assert envelope.kind == "holds-to-harsh-end"
    assert describe(envelope, search.space, "ms") == (
        "holds up to 800 ms (the harshest magnitude allowed)"
    )


def noisy_at(magnitude: float, true: float, pattern: Iterator[bool]) -> Oracle:
    """A threshold at ``true``; at ``magnitude`` the outcome follows ``pattern``."""

    def oracle(m: float, _n: int) -> str:
        if m == magnitude:
            return "deviated" if next(pattern) else "held"
        return "deviated" if m >= true else "held"

    return oracle


def test_a_noisy_boundary_is_reported_with_its_disagreeing_runs() -> None:
    search = Search(Space(1, 40, 1, integer=True), repeats=3, max_runs=30)
    pattern = iter([False, True, False, False, True, True, False])
    observations, _ = drive(search, noisy_at(19, 20, pattern))
    envelope = conclude(search, observations)
    assert envelope.kind == "noisy"
    (tally,) = envelope.noisy
    assert tally.magnitude == 19 and tally.held and tally.deviated
    runs_at_19 = [i for i, o in enumerate(observations, 1) if o.magnitude == 19]
    assert sorted(tally.held + tally.deviated) == runs_at_19
    # one deviation marks 19 as broken: the boundary is where the runs agree
    assert (envelope.held, envelope.deviated) == (18, 19)
    text = describe(envelope, search.space, "connections")
    assert text == "noisy: breaks between 18 and 19 connections, but runs disagree"
    assert "deviated: runs" in agreement(envelope)


def test_a_disagreeing_repeat_at_the_harsh_end_sends_the_search_back_to_bisect() -> None:
    # at 0 free slots the fault's own count races the app's connections: sometimes
    # it holds; from 1 free slot down it always holds
    search = Search(Space(0, 20, 1, integer=True, direction="down"), repeats=1, max_runs=16)
    flips = iter([False, True])

    def oracle(m: float, _n: int) -> str:
        return ("deviated" if next(flips) else "held") if m == 0 else "held"

    observations, stopped = drive(search, oracle)
    assert stopped is None
    envelope = conclude(search, observations)
    assert (envelope.kind, envelope.held, envelope.deviated) == ("noisy", 1, 0)
    assert describe(envelope, search.space, "free") == (
        "noisy: breaks between 0 and 1 free, but runs disagree"
    )
    assert [t.text() for t in envelope.tallies] == [
        "held 2/2 at 1",
        "held 1/2 and deviated 1/2 at 0 (held: runs 2; deviated: runs 3)",
    ]
    assert [o.phase for o in observations[:3]] == ["end", "end", "repeat"]
    assert "bisect" in {o.phase for o in observations[3:]}


def test_a_deviation_milder_than_a_held_magnitude_is_non_monotone() -> None:
    search = Search(Space(0, 100, 10), repeats=1)
    observations = [
        Observation(0, "held", "end"),
        Observation(100, "deviated", "end"),
        Observation(50, "held", "bisect"),
        Observation(75, "deviated", "bisect"),
        Observation(62.5, "deviated", "bisect"),
        Observation(56.25, "held", "bisect"),
        Observation(56.25, "held", "repeat"),
        Observation(62.5, "deviated", "repeat"),
        Observation(0, "deviated", "repeat"),  # not planned: as if a rerun saw it break
    ]
    envelope = conclude(search, observations)
    assert envelope.kind == "noisy"
    assert envelope.non_monotone
    assert envelope.non_monotone[0].startswith("deviated at 0 (run 9) although 56.25")


def test_unsteady_runs_never_count_and_are_retried() -> None:
    search = Search(Space(1, 40, 1, integer=True), repeats=1, max_runs=30)
    unsteady_runs = {3, 4}
    base = threshold(20)

    def oracle(m: float, n: int) -> str:
        return "unsteady" if n in unsteady_runs else base(m, n)

    observations, stopped = drive(search, oracle)
    assert stopped is None
    assert observations[2].magnitude == observations[3].magnitude == observations[4].magnitude
    envelope = conclude(search, observations)
    assert (envelope.kind, envelope.held, envelope.deviated) == ("boundary", 19, 20)
    assert envelope.runs == envelope.counted + 2


def test_too_many_unsteady_runs_in_a_row_stop_the_search() -> None:
    search = Search(Space(1, 40, 1, integer=True), repeats=1, max_unsteady=3)

    def oracle(m: float, n: int) -> str:
        return "held" if n == 1 else "unsteady"

    observations, stopped = drive(search, oracle)
    assert len(observations) == 4
    assert isinstance(stopped, Stopped) and stopped.cause == "unsteady"
    envelope = conclude(search, observations)
    assert envelope.kind == "incomplete"
    assert envelope.held == 1 and envelope.deviated is None
    assert describe(envelope, search.space).startswith("incomplete: holds up to 1 so far; 3 runs")


@pytest.mark.parametrize("outcome", ["failed", "aborted", "interrupted", "rollback-failed"])
def test_failed_aborted_or_interrupted_runs_stop_at_once(outcome: str) -> None:
    search = Search(Space(1, 40, 1, integer=True), repeats=1)

    def oracle(m: float, n: int) -> str:
        return outcome if n == 3 else threshold(20)(m, n)

    observations, stopped = drive(search, oracle)
    assert len(observations) == 3
    assert isinstance(stopped, Stopped) and stopped.cause == outcome
    envelope = conclude(search, observations)
    assert envelope.kind == "incomplete" and envelope.counted == 2


def test_max_runs_caps_the_search() -> None:
    search = Search(Space(1, 1000, 1, integer=True), repeats=2, max_runs=5)
    observations, stopped = drive(search, threshold(500))
    assert len(observations) == 5
    assert isinstance(stopped, Stopped) and stopped.cause == "max-runs"
    envelope = conclude(search, observations)
    assert envelope.kind == "incomplete"
    assert "--max-runs 5 reached" in describe(envelope, search.space)


def test_a_range_narrower_than_the_resolution_only_runs_the_ends() -> None:
    search = Search(Space(1, 2, 1, integer=True), repeats=0)
    observations, _ = drive(search, threshold(2))
    assert [o.phase for o in observations] == ["end", "end"]
    assert conclude(search, observations).kind == "boundary"


def test_an_unfinished_search_is_incomplete() -> None:
    search = Search(Space(1, 40, 1, integer=True))
    first = next_step(search, [])
    assert isinstance(first, Step) and first.magnitude == 1
    envelope = conclude(search, [Observation(1, "held", "end")])
    assert envelope.kind == "incomplete"
    assert envelope.stopped is not None and envelope.stopped.cause == "not-finished"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"low": 5, "high": 5, "resolution": 1}, "is empty"),
        ({"low": 1, "high": 5, "resolution": 0}, "resolution must be > 0"),
        ({"low": 1, "high": 5, "resolution": 1.5, "relative": True}, "below 100 %"),
        ({"low": 1.5, "high": 5, "resolution": 1, "integer": True}, "integer ends"),
        ({"low": 1, "high": math.inf, "resolution": 1}, "is empty"),
    ],
)
def test_bad_spaces_are_refused(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Space(**kwargs)  # type: ignore[arg-type]


def test_a_relative_resolution_around_zero_is_unreachable() -> None:
    search = Search(Space(-10, 10, 0.05, relative=True))
    assert worst_case_runs(search) > 1000
