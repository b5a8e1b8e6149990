"""Off a terminal, ``gameday validate`` prints through a LineConsole (no rich import):
every line must be exactly what the rich console it stands in for would print."""

from __future__ import annotations

import contextlib
import io

import pytest
import rich.markup
from rich.console import Console

from chaos_ext._core.console import NOT_A_TERMINAL_WIDTH, LineConsole, escape

TEXTS = [
    "x [bold] y\\ [/] z",
    "a\\",
    "\\[red] already escaped",
    "[/]",
    "method[0].provider.arguments: delay_seconds: expected float, got 'abc'",
    "http://prometheus:9090 up offset (1m * 2) [5m:1m]",
    "emoji codes :fire: :not-one: a:b: c",
    "control\r codes\x07 and\x0b more",
    "two\nlines [1]",
    "wide 漢字 and a tab\tthere",
]
MARKUP = [
    "[green]valid:[/] x.json — title",
    "[bold red]x[/bold red] [link=http://a]l[/link] [yellow]w[/]",
    "no markup :smile: at all",
    "a\\\\[red]b[/] c",
]


def _rich(markup: str, **options: object) -> str:
    out = io.StringIO()
    console = Console(
        file=out, soft_wrap=True, width=NOT_A_TERMINAL_WIDTH, color_system=None, no_color=True
    )
    console.print(markup, **options)  # type: ignore[arg-type]
    return out.getvalue()


def _lines(markup: str, **options: object) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        LineConsole().print(markup, **options)
    return out.getvalue()


@pytest.mark.parametrize("text", TEXTS)
def test_escape_is_rich_escape(text: str) -> None:
    assert escape(text) == rich.markup.escape(text)


@pytest.mark.parametrize("markup", [*MARKUP, *(f"[red]invalid:[/] {escape(t)}" for t in TEXTS)])
def test_a_line_is_printed_as_rich_prints_it(markup: str) -> None:
    assert _lines(markup, highlight=False) == _rich(markup, highlight=False)


def test_anything_else_goes_to_rich() -> None:
    assert _lines("[red]x[/]", style="bold", highlight=False) == _rich("x", highlight=False)
