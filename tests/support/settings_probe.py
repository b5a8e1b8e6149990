"""Test-only: a Chaos Toolkit python activity that says which ledger the run's code uses.

``tests/test_settings.py`` calls it from an experiment: it runs in chaoslib's
activity thread, where the command's settings must reach it without
``os.environ`` having been written.
"""

from __future__ import annotations

import os

from chaos_ext._core.ledger import ledger_path


def ledger_in_use() -> dict[str, str | None]:
    """The ledger the code in this thread uses, and ``$GAMEDAY_LEDGER`` as it is."""
    return {"ledger": str(ledger_path()), "environ": os.environ.get("GAMEDAY_LEDGER")}
