"""The rule: nothing a signal handler calls may take a non-reentrant lock.

Python runs a signal handler in the main thread between any two bytecodes, so also
while that same thread holds the lock the handler needs. Under stress-ng a double
SIGTERM, 0 ms apart (tests/test_stop_path.py's ``[15-15-0.0]`` cell), left a run hanging
for good: the second handler's ``request_stop`` waited for the stop event's internal
lock, held by the first handler, in the same thread. The timing cannot be forced from
outside, so these tests put the main thread exactly there (holding each lock the stop
path takes, as an interrupted ``set``, ``wait`` or ``request_stop`` does) and call what
the handler calls, in a child process bounded by a timeout: a deadlock is a timeout.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from support.harness import pythonpath

NESTED = {
    # the first handler was inside the stop event's set() (or a pause's wait) when the
    # second signal landed
    "stop-event": "with stop._EVENT._cond:\n    stop.request_stop('SIGTERM')",
    # the first handler was inside request_stop's own critical section
    "stop-lock": "with stop._LOCK:\n    stop.request_stop('SIGTERM')",
    # a pause was being entered or left (wait holds the event's lock around its check)
    "pause": "with stop._EVENT._cond:\n    stop.pause(0)\n    stop.request_stop('SIGINT')",
    # the runner's handler itself, nested in a stop the watch thread's SIGUSR1 started
    "handler": (
        "from chaos_ext._runner import signals\n"
        "signals._raised[0] = True\n"
        "with stop._EVENT._cond, stop._LOCK:\n"
        "    signals.interrupt(15, None)"
    ),
}


@pytest.mark.parametrize("held", sorted(NESTED))
def test_what_a_signal_handler_calls_never_waits_for_a_lock_its_thread_holds(held: str) -> None:
    code = "from chaos_ext._core import stop\n" + NESTED[held] + "\nprint('returned')\n"
    env = {"PYTHONPATH": pythonpath(), "PATH": "/usr/bin:/bin"}
    try:
        result = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=20,  # the calls take milliseconds; a deadlock never returns
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"deadlock: request_stop waited for a lock its own thread holds ({held})")
    assert result.returncode == 0 and "returned" in result.stdout, result.stderr
