"""When each phase of a run ran: the marks the run's timeline is built from.

A chaoslib :class:`RunEventHandler` (:class:`PhaseMarks`) writes, as the run
goes, ``journal["gameday"]["phases"]``: a list of ``{"name", "start", "end"}``
(epoch seconds; ``end`` None while the phase runs, or when a stop ended the run
inside it) for ``settle`` (with ``--settle``), ``before`` (the steady state
before the method), ``method``, ``after`` (the steady state after the method),
``rollbacks``, and each activity's pauses as ``{"name": "pause", "which":
"before"|"after", "activity": <name>, ...}``. The runner marks its own
``sweep`` and ``recovery`` with :func:`phase`. With chaoslib's times, the
ledger and the stops, :func:`chaos_ext._core.timeline.build_timeline` makes
the run's one timeline from these.

The handler also records ``gameday.text_vars``: the loaded configuration values
that the experiment's shown texts name (``${var}`` in its title, description,
activity names), so that every output shows them substituted
(:mod:`chaos_ext._core.timeline.texts`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from chaoslib import substitute
from chaoslib.run import RunEventHandler

from chaos_ext._core.timeline import text_vars

__all__ = ["PhaseMarks", "phase"]


def _marks(journal: dict[str, Any]) -> list[dict[str, Any]]:
    marks: list[dict[str, Any]] = journal.setdefault("gameday", {}).setdefault("phases", [])
    return marks


def _open(journal: dict[str, Any], name: str, at: float, **extra: Any) -> dict[str, Any]:
    mark = {"name": name, "start": round(at, 6), "end": None, **extra}
    _marks(journal).append(mark)
    return mark


def _close(mark: dict[str, Any] | None, at: float) -> None:
    if mark is not None and mark["end"] is None:
        mark["end"] = round(at, 6)


@contextmanager
def phase(
    journal: dict[str, Any], name: str, clock: Callable[[], float] = time.time
) -> Iterator[None]:
    """Mark the runner's own phase ``name`` (``sweep``, ``recovery``) around a block."""
    mark = _open(journal, name, clock())
    try:
        yield
    finally:
        _close(mark, clock())


class PhaseMarks(RunEventHandler):  # type: ignore[misc]
    """Marks chaoslib's phases and each activity's pauses in the journal (module docstring).

    Registered before the settling handler: ``start_hypothesis_before`` then opens
    ``settle`` (when settling) and the next event, the first probe of chaoslib's own
    check, closes it and opens ``before``."""

    def __init__(self, settling: bool, clock: Callable[[], float] = time.time) -> None:
        self.settling = settling
        self.clock = clock
        self._journal: dict[str, Any] | None = None
        self._phase: dict[str, Any] | None = None
        self._pause: dict[str, Any] | None = None
        self._lock = threading.Lock()  # continuous checks report from their own thread
        self._own: set[int] = set()  # the method's and the rollbacks' activities
        self._configuration: dict[str, Any] = {}

    def started(self, experiment: dict[str, Any], journal: dict[str, Any]) -> None:
        self._journal = journal
        blocks = (experiment.get("method"), experiment.get("rollbacks"))
        self._own = {id(a) for block in blocks for a in block or [] if isinstance(a, dict)}

    def running(
        self,
        experiment: dict[str, Any],
        journal: dict[str, Any],
        configuration: dict[str, Any],
        secrets: Any,
        schedule: Any,
        settings: Any,
    ) -> None:
        self._configuration = configuration or {}
        journal.setdefault("gameday", {})["text_vars"] = text_vars(experiment, configuration or {})

    def _enter(self, name: str) -> None:
        with self._lock:
            now = self.clock()
            self._end_pause(now)
            _close(self._phase, now)
            self._phase = _open(self._journal, name, now) if self._journal is not None else None

    def _leave(self) -> None:
        with self._lock:
            now = self.clock()
            self._end_pause(now)
            _close(self._phase, now)
            self._phase = None

    def _end_pause(self, now: float) -> None:
        _close(self._pause, now)
        self._pause = None

    def start_hypothesis_before(self, experiment: dict[str, Any]) -> None:
        self._enter("settle" if self.settling else "before")

    def hypothesis_before_completed(self, *args: Any) -> None:
        self._settled()
        self._leave()

    def start_method(self, experiment: dict[str, Any]) -> None:
        self._enter("method")

    def method_completed(self, experiment: dict[str, Any], state: Any = None) -> None:
        self._leave()

    def start_hypothesis_after(self, experiment: dict[str, Any]) -> None:
        self._enter("after")

    def hypothesis_after_completed(self, *args: Any) -> None:
        self._leave()

    def start_rollbacks(self, experiment: dict[str, Any]) -> None:
        self._enter("rollbacks")

    def rollbacks_completed(self, *args: Any) -> None:
        self._leave()

    def interrupted(self, *args: Any) -> None:
        self._leave()

    def signal_exit(self) -> None:
        self._leave()

    def finish(self, journal: dict[str, Any]) -> None:
        self._leave()  # a settle that ran out ends here: no check of chaoslib's followed

    def _settled(self) -> None:
        """Settling ends at the first event after it: chaoslib's own check begins."""
        phase_now = self._phase
        if phase_now is not None and phase_now["name"] == "settle":
            self._enter("before")

    def start_activity(self, activity: dict[str, Any]) -> None:
        """A pause before an activity ends as it starts (chaoslib slept it just now, for
        its declared length); the previous activity's pause after ended before that."""
        self._settled()
        if id(activity) not in self._own or self._journal is None:
            return
        with self._lock:
            now = self.clock()
            before = self._pause_s(activity, "before")
            _close(self._pause, now - before)
            self._pause = None
            if before:
                mark = _open(self._journal, "pause", now - before, which="before")
                mark["activity"] = str(activity.get("name", "?"))
                _close(mark, now)

    def activity_completed(self, activity: dict[str, Any], run: dict[str, Any]) -> None:
        """A pause after an activity begins as it completes and ends at the next event."""
        journal = self._journal
        if id(activity) not in self._own or journal is None or not self._pause_s(activity, "after"):
            return
        with self._lock:
            now = self.clock()
            self._end_pause(now)
            self._pause = _open(journal, "pause", now, which="after")
            self._pause["activity"] = str(activity.get("name", "?"))

    def _pause_s(self, activity: dict[str, Any], which: str) -> float:
        """The pause ``which`` of ``activity`` in seconds, ``${var}`` substituted as chaoslib
        does when it pauses (0: none, or unreadable)."""
        pauses = activity.get("pauses")
        if not isinstance(pauses, dict) or not pauses.get(which):
            return 0.0
        try:
            return max(0.0, float(substitute(pauses[which], self._configuration, None)))
        except (TypeError, ValueError):
            return 0.0
