"""gameday subcommands: each module has ``register(subparsers)``."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["commands"]

_COMMANDS = (
    "run",
    "envelope",
    "validate",
    "plan",
    "ledger",
    "sandbox",
    "audit",
    "report",
    "gate",
    "compare",
    "schedule",
    "catalog",
)


def commands() -> list[ModuleType]:
    """The subcommand modules, in ``--help`` order."""
    return [importlib.import_module(f"{__name__}.{name}") for name in _COMMANDS]
