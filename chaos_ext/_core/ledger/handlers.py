"""The undo handlers, one per fault kind, and the undo of one entry with them.

The module that injects a fault registers its undo in :data:`UNDO_HANDLERS`
(``@undo_handler("netem")`` in :mod:`chaos_ext._core.ledger`, which is
``UNDO_HANDLERS.register``). :meth:`UndoRegistry.handler_for` imports the module
an entry names when its kind is not registered yet, so ``gameday rollback``
finds every handler without importing every fault domain first.

A test may replace a kind's handler for a while (:meth:`UndoRegistry.swapped`,
the mutation check's :meth:`UndoRegistry.swap`): the replacement is made from
the registered handler when it is looked up, so the real one must exist.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chaos_ext._core.failpoint import failpoint
from chaos_ext._core.ledger.entry import Entry
from chaos_ext._core.ledger.machine import machine_note
from chaos_ext.errors import LedgerError, RollbackFailed

if TYPE_CHECKING:
    from chaos_ext._core.ledger import Ledger

__all__ = [
    "UNDO_HANDLERS",
    "UndoHandler",
    "UndoOutcome",
    "UndoRegistry",
    "undo_claimed",
    "undo_unrecorded",
]

UndoHandler = Callable[[Entry], "str | None"]
"""Undo the fault of an entry, idempotently; the note to close it with (None: "undone")."""
Swap = Callable[[UndoHandler], UndoHandler]


class UndoRegistry:
    """Undo handlers by fault kind; thread safe. One instance: :data:`UNDO_HANDLERS`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handlers: dict[str, UndoHandler] = {}
        self._swaps: dict[str, Swap] = {}

    def register(self, kind: str) -> Callable[[UndoHandler], UndoHandler]:
        """A decorator registering the idempotent undo of fault ``kind`` (the last one wins)."""

        def add(func: UndoHandler) -> UndoHandler:
            with self._lock:
                self._handlers[kind] = func
            return func

        return add

    def kinds(self) -> list[str]:
        """The kinds registered so far (by the modules imported so far), sorted."""
        with self._lock:
            return sorted(self._handlers)

    def registered(self, kind: str) -> UndoHandler | None:
        """The handler registered for ``kind`` (never a swapped one); None if there is none."""
        with self._lock:
            return self._handlers.get(kind)

    def handler_for(self, entry: Entry) -> UndoHandler:
        """The handler of ``entry``'s kind, importing the module it names if needed.

        Raises RollbackFailed when that module cannot be imported or registers
        no handler for the kind.
        """
        if self.registered(entry.kind) is None:
            try:
                importlib.import_module(entry.module)
            except ImportError as exc:
                raise RollbackFailed(
                    f"cannot import {entry.module!r} to undo {entry.kind} on {entry.target}: {exc}"
                ) from exc
        with self._lock:
            handler, swap = self._handlers.get(entry.kind), self._swaps.get(entry.kind)
        if handler is None:
            raise RollbackFailed(
                f"no undo handler registered for fault kind {entry.kind!r} by {entry.module}"
            )
        return swap(handler) if swap is not None else handler

    def swap(self, kind: str, replace: Swap) -> Callable[[], None]:
        """From now on, ``kind``'s handler is ``replace(registered handler)``; returns the
        function that undoes the swap. Tests only: see :meth:`swapped`."""
        with self._lock:
            previous = self._swaps.get(kind)
            self._swaps[kind] = replace

        def restore() -> None:
            with self._lock:
                if previous is None:
                    self._swaps.pop(kind, None)
                else:
                    self._swaps[kind] = previous

        return restore

    @contextlib.contextmanager
    def swapped(self, kind: str, replace: Swap) -> Iterator[None]:
        """:meth:`swap` for the ``with`` block; the handler in force before comes back after."""
        restore = self.swap(kind, replace)
        try:
            yield
        finally:
            restore()


UNDO_HANDLERS = UndoRegistry()
"""Every fault kind's undo handler (``@undo_handler`` fills it)."""


@dataclass(frozen=True)
class UndoOutcome:
    """What :func:`chaos_ext._core.ledger.undo` did with one entry; ``undone_here``: False
    if another undo did it; ``unrecorded``: the fault was undone, only the ledger could not
    record it (``ok`` False)."""

    entry: Entry
    ok: bool
    note: str
    undone_here: bool = True
    unrecorded: bool = False


def _undo_note(entry: Entry, by: str) -> str:
    note = machine_note(entry) or UNDO_HANDLERS.handler_for(entry)(entry) or "undone"
    return f"{by}: {note}" if by else note


def undo_claimed(entry: Entry, book: Ledger, by: str = "") -> UndoOutcome:
    """Undo ``entry`` and close it in ``book``, its undo claimed (see ``ledger.undo``)."""
    current = book.get(entry.id)
    if current is not None and current.state == "closed":
        note = current.note or "undone"
        if entry.state == "open":  # closed since the caller read it: another undo did it
            note = f"already undone meanwhile by another rollback or timer ({note})"
        return UndoOutcome(current, True, note, False)
    latest = current or entry
    try:
        note = _undo_note(latest, by)
    except Exception as exc:  # noqa: BLE001 - every failure is recorded, none escapes a sweep
        message = f"{by + ': ' if by else ''}{type(exc).__name__}: {exc}"
        with contextlib.suppress(LedgerError):
            book.mark_error(entry.id, message)
        return UndoOutcome(latest, False, message)
    failpoint("undo.before-close")
    try:
        book.close(entry.id, note)
    except LedgerError as exc:
        return UndoOutcome(
            latest, False, f"{note}; but the ledger could not record it: {exc}", unrecorded=True
        )
    return UndoOutcome(latest, True, note)


def undo_unrecorded(entry: Entry, error: LedgerError, *, by: str = "") -> UndoOutcome:
    """Undo ``entry`` as given when its ledger cannot be used; the outcome fails (see undo)."""
    try:
        note = _undo_note(entry, by)
    except Exception as exc:  # noqa: BLE001 - reported in the outcome
        return UndoOutcome(entry, False, f"{type(exc).__name__}: {exc}; and the ledger: {error}")
    return UndoOutcome(
        entry, False, f"{note}; but the ledger could not record it: {error}", unrecorded=True
    )
