"""A fault kind whose undo takes a while and counts its runs: two rollbacks race over it.

Its undo appends a line to the file named in the recipe (``runs``), then
sleeps ``seconds``: a second undo of the same entry that ran its handler too
would add a second line.
"""

from __future__ import annotations

import time
from pathlib import Path

from chaos_ext._core.ledger import Entry, undo_handler

KIND = "unit-slow-undo"


@undo_handler(KIND)
def _slow_undo(entry: Entry) -> str:
    with Path(entry.recipe["runs"]).open("a") as runs:
        runs.write(f"{entry.id}\n")
    time.sleep(float(entry.recipe.get("seconds", 1.0)))
    return f"slow undo of {entry.target} done"
