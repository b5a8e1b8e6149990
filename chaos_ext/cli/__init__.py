"""gameday subcommands: each module has ``register(subparsers)``.

The parser is built without importing the subcommands: :data:`COMMANDS` names
each command's module and one-line help, and only the chosen command's module
is imported (``gameday --help`` imports none of them).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import NamedTuple

__all__ = ["COMMANDS", "Command", "command_module"]


class Command(NamedTuple):
    """One subcommand: its name, the module that registers it, its ``--help`` line."""

    name: str
    module: str
    help: str


COMMANDS: tuple[Command, ...] = (
    Command("run", "run", "run experiments, roll back on every exit path"),
    Command("envelope", "envelope", "find the magnitude at which a hypothesis breaks"),
    Command("validate", "validate", "validate experiments, touch nothing"),
    Command("plan", "plan", "show each fault's blast radius and preflights, inject nothing"),
    Command("advise", "advise", "what to fix: findings of runs, and a cluster's incident risks"),
    Command("ledger", "ledger", "list open faults; check or repair the ledger"),
    Command("rollback", "ledger", "undo every open fault"),
    Command("sandbox", "sandbox", "bring the local sandbox platform up or down"),
    Command("audit", "audit", "audit live configuration (Envoy edge settings)"),
    Command("report", "report", "HTML report + Markdown summary from journals"),
    Command("gate", "gate", "run experiments as a CI gate: JUnit XML + exit code"),
    Command("compare", "compare", "baseline vs tuned runs: per-metric differences with CIs"),
    Command("schedule", "schedule", "emit CronJob + RBAC manifests for a scheduled game day"),
    Command("catalog", "catalog", "list the named Prometheus probes and abort plans"),
    Command("faults", "faults", "list every fault kind: actions, undo, plan, scan, deadline"),
)


def command_module(command: Command) -> ModuleType:
    """Import the module that registers ``command`` (its ``register(subparsers)``)."""
    return importlib.import_module(f"{__name__}.{command.module}")
