"""A Chaos Toolkit control whose functions take exactly the arguments they name.

chaoslib passes every argument of a control declaration to each of its
functions; an argument they do not take is a TypeError in the middle of a run.
"""

from __future__ import annotations

from typing import Any

__all__ = ["before_experiment_control", "configure_control"]


def configure_control(level: str = "info") -> None:
    """Accept only ``level``."""


def before_experiment_control(context: Any, level: str = "info") -> None:
    """Accept only ``level`` (and chaoslib's context)."""
