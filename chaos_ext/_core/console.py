"""Consoles that read well in a terminal and in a CI log.

In a terminal, rich wraps long lines at the terminal's width and fits tables
to it. Anywhere else (a pipe, a file, a CI log) lines are never wrapped (one
message is one line, whatever its length) and tables get all the width they
need, so no column is squeezed into a strip. Colour is off with ``NO_COLOR``
set to anything non-empty (https://no-color.org) or ``gameday --no-color``;
off a terminal rich adds none anyway unless ``FORCE_COLOR`` asks for it.
"""

from __future__ import annotations

import os
from typing import IO, Literal

from rich.console import Console

__all__ = ["NOT_A_TERMINAL_WIDTH", "colour_wanted", "make_console"]

NOT_A_TERMINAL_WIDTH = 10_000
"""Width tables may use off a terminal: wide enough that none is ever squeezed
(a table only takes the width its cells need; text is never padded to it)."""


def colour_wanted(no_color: bool = False) -> bool:
    """False with ``--no-color`` or a non-empty ``NO_COLOR``."""
    return not no_color and not os.environ.get("NO_COLOR")


def make_console(
    *, stderr: bool = False, no_color: bool = False, file: IO[str] | None = None
) -> Console:
    """A rich console for stdout (or stderr, or ``file``) following the rules above."""
    colour: Literal["auto"] | None = "auto" if colour_wanted(no_color) else None
    probe = Console(stderr=stderr, file=file)
    if probe.is_terminal:
        return Console(stderr=stderr, file=file, color_system=colour, no_color=colour is None)
    return Console(
        stderr=stderr,
        file=file,
        color_system=colour,
        no_color=colour is None,
        soft_wrap=True,
        width=NOT_A_TERMINAL_WIDTH,
    )
