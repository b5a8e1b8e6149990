"""Ledger probes: what is currently injected."""

from __future__ import annotations

from chaos_ext._core.contract import Configuration, Secrets
from chaos_ext._core.ledger import default_ledger
from chaos_ext._core.validation import validated_by

__all__ = ["open_faults"]


@validated_by()
def open_faults(
    kind: str = "", configuration: Configuration = None, secrets: Secrets = None
) -> int:
    """Count the faults open in the gameday ledger (all kinds, or one ``kind``).

    A steady-state hypothesis "open_faults == 0" checks that a previous run
    left nothing behind.
    """
    entries = default_ledger().open_entries()
    return sum(1 for entry in entries if not kind or entry.kind == kind)
