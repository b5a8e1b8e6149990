"""Never a silent terminal: after ``every`` seconds without a line, say what is still running.

``sandbox up`` waits on slow things (PostgreSQL's initdb, the node VM's boot, the
first minute of traffic), more so on a busy machine; a newcomer must see that it
is working, not guess.

    with Heartbeat(say) as beat:
        beat.say("PostgreSQL in gd-db")  # printed; the clock restarts
        ...                              # 8 s later: "... still: PostgreSQL in gd-db (8 s)"
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType

__all__ = ["Heartbeat"]


class Heartbeat:
    """Wraps a ``say`` callable; a background thread repeats the last step when silent."""

    def __init__(self, say: Callable[[str], None], every: float = 8.0) -> None:
        self._say, self.every = say, every
        self._lock = threading.Lock()
        self._last_text, self._last_at, self._step_at = (
            "starting",
            time.monotonic(),
            time.monotonic(),
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gameday-heartbeat", daemon=True)

    def say(self, text: str) -> None:
        with self._lock:
            now = time.monotonic()
            self._last_text, self._last_at, self._step_at = text.strip(), now, now
            self._say(text)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:
                now = time.monotonic()
                if now - self._last_at >= self.every:
                    self._say(f"... still: {self._last_text} ({now - self._step_at:.0f} s)")
                    self._last_at = now

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
