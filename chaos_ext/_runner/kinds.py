"""The runner's own kinds: orphan helpers, and the fault windows it publishes."""

from __future__ import annotations

from chaos_ext._core.helper_kind import HELPER_ORPHAN
from chaos_ext._core.ledger import FAULT_KINDS, FaultKind
from chaos_ext._runner.windows import KIND, delete_group

__all__ = ["FAULT_WINDOW", "HELPER_ORPHAN"]

FAULT_WINDOW = FaultKind(
    name=KIND,
    summary="the run's fault windows pushed to a Pushgateway group: deleted at the end",
    role="internal",
    module="chaos_ext._runner.windows",
    undo=delete_group,
    docs="docs/reporting.md",
)
FAULT_KINDS.declare(FAULT_WINDOW)
