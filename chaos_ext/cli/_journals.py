"""Plumbing shared by report/gate/compare: reading journal files into views."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from chaos_ext._products.envelope.view import (
    EnvelopeError,
    EnvelopeView,
    envelope_paths,
    load_envelope,
)
from chaos_ext._products.report.model import JournalError, RunView, load_journal, view_of

__all__ = ["expand_journal_paths", "load_envelopes", "load_views"]


JOURNAL_SUBFOLDERS = ("run", "journals")
"""Where a report folder keeps its journals: ``make demo`` and ``sandbox run`` write
them to ``run/``, ``gameday report`` copies them (redacted) to ``journals/``."""


def _journals_in(folder: Path) -> list[Path]:
    direct = sorted(folder.glob("*.json"))
    if direct:
        return direct
    for sub in JOURNAL_SUBFOLDERS:
        found = sorted((folder / sub).glob("*.json"))
        if found:
            return found
    return []


def expand_journal_paths(names: Sequence[str]) -> list[Path]:
    """Files as given; a directory stands for the ``*.json`` files directly in it, or,
    in a report folder, for those of its ``run/`` (else ``journals/``) folder."""
    paths: list[Path] = []
    for name in names:
        path = Path(name)
        paths.extend(_journals_in(path) if path.is_dir() else [path])
    return paths


def load_views(
    names: Sequence[str], console: Console, secrets: Sequence[str] = ()
) -> list[tuple[dict[str, Any], RunView]] | None:
    """Redacted journals and their views; one line per bad file and None if any is bad."""
    loaded: list[tuple[dict[str, Any], RunView]] = []
    ok = True
    paths = expand_journal_paths(names)
    if not paths:
        console.print("[red]no journal found[/]")
        return None
    for path in paths:
        try:
            journal = load_journal(path, tuple(secrets))
        except JournalError as exc:
            console.print(f"[red]invalid journal:[/] {escape(str(exc))}", highlight=False)
            ok = False
            continue
        loaded.append((journal, view_of(journal, source=str(path))))
    return loaded if ok else None


def load_envelopes(
    names: Sequence[str], console: Console
) -> tuple[list[EnvelopeView], list[str]] | None:
    """The envelopes among ``names`` (see :func:`envelope_paths`) and the other inputs;
    one line per bad envelope and None if any is bad."""
    paths, others = envelope_paths(names)
    views: list[EnvelopeView] = []
    for path in paths:
        try:
            views.append(load_envelope(path))
        except EnvelopeError as exc:
            console.print(f"[red]invalid envelope:[/] {escape(str(exc))}", highlight=False)
            return None
    return views, others
