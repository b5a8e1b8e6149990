"""Finding loads and fault windows in the ledger, and where results are kept."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlsplit

from chaos_ext._core.ledger import Entry, current_run_id, default_ledger, ledger_path
from chaos_ext.errors import InvalidArgument
from chaos_ext.load.errors import LoadError

__all__ = ["KIND", "describe_url", "fault_window", "find_load", "results_root"]

KIND = "http-load"


def results_root() -> Path:
    """Loads keep their results beside the ledger: ``<ledger dir>/load/<load id>/``."""
    return ledger_path().parent / "load"


def describe_url(url: str) -> str:
    """A URL without its query string (which may carry tokens), for ledgers and journals."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path or '/'}"


def _latest(entries: list[Entry], load: str) -> Entry | None:
    for entry in reversed(entries):
        if entry.kind == KIND and (not load or load in (entry.id, entry.recipe.get("name"))):
            return entry
    return None


def find_load(load: str = "", *, required: bool = True, this_run: bool = False) -> Entry | None:
    """The ledger entry of load ``load`` (id or name; empty: any), this run's latest first.

    Outside this run (unless ``this_run``) the latest matching load of any run.
    """
    book = default_ledger()
    found = book.get(load) if load else None
    if found is not None and found.kind != KIND:
        found = None
    if found is None:
        found = _latest(book.history(run_id=current_run_id(), limit=500), load)
    if found is None and not this_run:
        found = _latest(book.history(limit=500), load)
    if found is None and required:
        what = f"named {load!r}" if load else "at all"
        raise LoadError(f"no HTTP load {what} in the ledger; start one with drive_http_load")
    return found


def fault_window(kind: str, target: str, run_id: str) -> tuple[float, float]:
    """``(start, end)`` of the latest fault ``kind`` (target containing ``target``) of a run.

    A fault still open ends now.
    """
    if not kind:
        raise InvalidArgument("fault_kind: empty")
    matches = [
        e
        for e in default_ledger().history(run_id=run_id, limit=500)
        if e.kind == kind and target in e.target
    ]
    if not matches:
        raise LoadError(
            f"no fault of kind {kind!r}"
            + (f" on a target containing {target!r}" if target else "")
            + " in the ledger for this load's run"
        )
    entry = matches[-1]
    return entry.created_at, entry.closed_at or time.time()
