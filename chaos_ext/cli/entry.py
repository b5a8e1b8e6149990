"""The ``gameday`` command's first lines: a stop is handled from the very start.

SIGINT or SIGTERM before any experiment has started (while Python imports the
command, parses its arguments, checks the ledger) ends the command with one
line and exit 2, no traceback: nothing was injected and no journal was
written. Once experiments run, the runner's own handlers take over
(:mod:`chaos_ext._runner.signals`). When the command is done (journals
written, exit code decided), SIGINT and SIGTERM are ignored until the process
has exited: a late signal cannot turn an exit 2 whose journal says so into a
143 or 130.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType

_EARLY: list[str] = []


def _early(signum: int, frame: FrameType | None) -> None:
    """Before the runner's modules are even imported: remember, and stop the import."""
    _EARLY.append(signal.Signals(signum).name)
    if len(_EARLY) == 1:
        raise KeyboardInterrupt(_EARLY[0])


def _say_stopped(cause: str) -> int:
    sys.stderr.write(
        f"gameday: {cause} received before any experiment started: stopped; "
        "nothing was injected, no journal was written\n"
    )
    sys.stderr.flush()
    return 2


def main() -> int:
    """Run the ``gameday`` command line; its exit code."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _early)
    code = 2
    try:
        code = _run()
    except KeyboardInterrupt as exc:  # only while importing: the rest is handled below
        code = _say_stopped(_EARLY[0] if _EARLY else str(exc) or "SIGINT")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
    return code


class StoppedBeforeRun(BaseException):
    """A signal came before any experiment started: nothing was injected."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


def _before_run(signum: int, frame: FrameType | None) -> None:
    """Until experiments run: stop the command (one line). Once they run, the stop is
    kept, and the batch does not start the next experiment (the runner's handlers are in
    place while one runs)."""
    from chaos_ext._core import stop  # noqa: PLC0415 - imported already (see _run)

    cause = signal.Signals(signum).name
    first = stop.request_stop(cause)
    if first and not stop.runs_begun():
        raise StoppedBeforeRun(cause)


def _run() -> int:
    from chaos_ext._core import stop  # noqa: PLC0415 - after the handler: imports can be stopped

    for cause in _EARLY:  # came before the stop path was importable
        stop.request_stop(cause)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _before_run)
    if stop.stopping():
        return _say_stopped(stop.cause() or "a signal")
    try:
        from chaos_ext.cli.main import main as command  # noqa: PLC0415 - stoppable, as above

        return command()
    except StoppedBeforeRun as exc:
        return _say_stopped(exc.cause)


if __name__ == "__main__":
    sys.exit(main())
