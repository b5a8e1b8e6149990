"""Control: give plain ``chaos run`` the gameday rollback guarantee.

Declare it in an experiment (or in Chaos Toolkit settings) to have every fault
that chaos_ext recorded during the run undone when the experiment ends, even
if it was interrupted or its own rollbacks were skipped::

    "controls": [{
        "name": "gameday-ledger",
        "provider": {"type": "python", "module": "chaos_ext.controls.ledger_sweep"}
    }]

``gameday run`` does this by itself; this control is for ``chaos run`` users.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from chaos_ext._core.ledger import current_run_id, default_ledger, set_current_run_id, undo

__all__ = ["after_experiment_control", "before_experiment_control"]

logger = logging.getLogger("chaostoolkit")


def before_experiment_control(context: dict[str, Any], **kwargs: Any) -> None:
    """Start a ledger run id for this experiment."""
    set_current_run_id(f"ctk-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}")


def after_experiment_control(context: dict[str, Any], state: Any, **kwargs: Any) -> None:
    """Undo every fault this run left open, newest first."""
    book = default_ledger()
    run_id = current_run_id()
    for entry in reversed(book.open_entries(run_id=run_id)):
        outcome = undo(entry, book)
        log = logger.info if outcome.ok else logger.error
        log("gameday ledger: undo %s on %s: %s", entry.kind, entry.target, outcome.note)
    set_current_run_id(None)
