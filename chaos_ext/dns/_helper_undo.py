"""The undos of the two DNS kinds whose fault is a helper process: the TCP hold and the flood.

Each stops the helpers started with the entry's id as their token
(:func:`chaos_ext._core.helper.stop_helpers`); when none is left, the note
says why, as far as the entry tells.
"""

from __future__ import annotations

import time

from chaos_ext._core import helper as _helper
from chaos_ext._core.ledger import Entry

__all__ = ["no_holder_note", "release_hold", "stop_flood"]


def release_hold(entry: Entry) -> str:
    """Stop the helper holding the TCP connections; all of them close with it."""
    stopped = _helper.stop_helpers(entry.id)
    if stopped:
        return f"stopped the helper holding TCP connections to {entry.target}; all closed"
    return no_holder_note(entry, time.time())


def no_holder_note(entry: Entry, now: float) -> str:
    """Why no helper was found, as far as the entry tells: never ready, ended early, or done."""
    if "pid" not in entry.recipe:  # recorded once the helper was ready
        # what was seen, not what is assumed: a start cut short may have held connections
        return (
            f"no helper holding connections to {entry.target} is running: its start did not"
            " complete (no pid was recorded; a start cut short ends its helper)"
        )
    hold = entry.recipe.get("hold_seconds")
    if hold is not None and now < entry.created_at + float(hold):
        return (
            f"no helper left holding connections to {entry.target}: it ended before its"
            " hold time (stopped already, or it died)"
        )
    return f"no helper left holding connections to {entry.target} (hold time elapsed)"


def stop_flood(entry: Entry) -> str:
    """Stop the flood's helper workers (one worker runs inside the action and ends with it)."""
    stopped = _helper.stop_helpers(entry.id)
    return f"stopped {stopped} flood worker(s) of {entry.target}" if stopped else "flood over"
