"""A Chaos Toolkit control for tests: its configure_control refuses an empty token.

Stands for any third-party control that imports fine but cannot be configured
(chaoslib only logs that at debug level and runs the experiment without it).
"""

from __future__ import annotations

from typing import Any

__all__ = ["before_experiment_control", "configure_control"]

configured: list[str] = []


def configure_control(token: str = "", **kwargs: Any) -> None:
    """Refuse an empty token, as a control needing credentials would."""
    if not token:
        raise ValueError("token is empty")
    configured.append(token)


def before_experiment_control(context: Any, **kwargs: Any) -> None:
    """Nothing to do: the control is only here to be configured."""
