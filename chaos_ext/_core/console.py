"""Consoles that read well in a terminal and in a CI log.

In a terminal, rich wraps long lines at the terminal's width and fits tables
to it. Anywhere else (a pipe, a file, a CI log) lines are never wrapped (one
message is one line, whatever its length) and tables get all the width they
need, so no column is squeezed into a strip. Colour is off with ``NO_COLOR``
set to anything non-empty (https://no-color.org) or ``gameday --no-color``;
off a terminal rich adds none anyway unless ``FORCE_COLOR`` asks for it.

Off a terminal, a command that only prints lines of markup (``gameday validate``)
gets a :class:`LineConsole`: the same text rich would print there, without
importing rich (a third of what validating a file costs otherwise); anything else
asked of it is handed to the rich console :func:`make_console` would have made.
"""

from __future__ import annotations

import os
import re
import sys
from typing import IO, TYPE_CHECKING, Any, Literal, cast

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "NOT_A_TERMINAL_WIDTH",
    "LineConsole",
    "colour_wanted",
    "escape",
    "line_console",
    "make_console",
    "plain_text",
]

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
    from rich.console import Console  # noqa: PLC0415 - not for a LineConsole's command

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


# rich's markup syntax (rich.markup): a tag, and what escape() protects
_TAG = re.compile(r"((\\*)\[([a-z#/@][^[]*?)])")
_TAG_TEXT = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")
_EMOJI_CODE = re.compile(r":\S*?:")
_CONTROL = dict.fromkeys((7, 8, 11, 12, 13))  # what rich strips: BEL BS VT FF CR


def escape(markup: str) -> str:
    """Text made safe to put in console markup: rich.markup.escape, without rich."""
    escaped = _TAG_TEXT.sub(lambda m: f"{m.group(1)}{m.group(1)}\\{m.group(2)}", markup)
    if escaped.endswith("\\") and not escaped.endswith("\\\\"):
        return escaped + "\\"
    return escaped


def _emoji(text: str) -> str:
    if not _EMOJI_CODE.search(text):
        return text
    from rich._emoji_replace import _emoji_replace  # noqa: PLC0415 - only for a :code:

    return _emoji_replace(text)


def plain_text(markup: str) -> str:
    """The text rich prints for ``markup`` off a terminal (tags dropped, escapes undone,
    emoji codes replaced, control codes stripped; a tab is for rich, which expands it by
    cell width: see :meth:`LineConsole.print`)."""
    if "[" not in markup:
        text = _emoji(markup)
    else:
        parts, position = [], 0
        for match in _TAG.finditer(markup):
            full, escapes, _ = match.groups()
            start, end = match.span()
            if start > position:
                parts.append(_emoji(markup[position:start].replace("\\[", "[")))
            if escapes:
                backslashes, escaped = divmod(len(escapes), 2)
                parts.append("\\" * backslashes)
                if escaped:
                    parts.append(_emoji(full[len(escapes) :].replace("\\[", "[")))
            position = end
        parts.append(_emoji(markup[position:].replace("\\[", "[")))
        text = "".join(parts)
    return text.translate(_CONTROL)


class LineConsole:
    """Off a terminal, prints lines of markup as rich would there, without rich.

    ``print`` of strings without a tab (with rich's ``sep``, ``end`` and ``highlight``,
    which changes nothing without colour) writes their :func:`plain_text`; any other
    call or attribute goes to the rich console :func:`make_console` would have made."""

    is_terminal = False

    def __init__(self, *, stderr: bool = False, no_color: bool = False) -> None:
        self._stderr = stderr
        self._no_color = no_color
        self._console: Console | None = None

    @property
    def file(self) -> IO[str]:
        return sys.stderr if self._stderr else sys.stdout

    def print(self, *objects: Any, sep: str = " ", end: str = "\n", **options: Any) -> None:
        plain = all(isinstance(o, str) and "\t" not in o for o in objects)
        if set(options) - {"highlight"} or not plain:
            self._rich().print(*objects, sep=sep, end=end, **options)
            return
        self.file.write(sep.join(plain_text(o) for o in objects) + end)
        self.file.flush()

    def _rich(self) -> Console:
        if self._console is None:
            self._console = make_console(stderr=self._stderr, no_color=self._no_color)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rich(), name)


def line_console(*, stderr: bool = False, no_color: bool = False) -> Console:
    """A :class:`LineConsole` off a terminal (as rich decides it: ``TTY_COMPATIBLE``,
    ``FORCE_COLOR``, then the stream), else :func:`make_console`'s. Typed as the rich
    console it stands in for."""
    stream = sys.stderr if stderr else sys.stdout
    compatible, forced = os.environ.get("TTY_COMPATIBLE", ""), os.environ.get("FORCE_COLOR")
    isatty = getattr(stream, "isatty", None)
    terminal = (
        compatible == "1"
        if compatible in ("0", "1")
        else forced != ""
        if forced is not None
        else bool(isatty and isatty())
    )
    if terminal:
        return make_console(stderr=stderr, no_color=no_color)
    return cast("Console", LineConsole(stderr=stderr, no_color=no_color))
