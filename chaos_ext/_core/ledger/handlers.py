"""The fault kinds (:data:`FAULT_KINDS`), and the undo of one entry with its kind's undo.

Each fault kind is declared once as a :class:`~chaos_ext._core.ledger.kinds.FaultKind`
in ``chaos_ext/<domain>/kinds.py`` (``FAULT_KINDS.declare(...)``).
:meth:`FaultKinds.handler_for` imports the module an entry names, then the
``kinds`` module of its package, when its kind is not declared yet, so
``gameday rollback`` finds every undo without importing every fault domain
first; :meth:`FaultKinds.load_all` imports every domain's declarations (the
one place that walks the packages).

A test may declare a kind with only an undo (:meth:`FaultKinds.register`,
``@undo_handler`` in :mod:`chaos_ext._core.ledger`), and may replace a
kind's undo for a while (:meth:`FaultKinds.swapped`, the mutation check's
:meth:`FaultKinds.swap`): the replacement is made from the declared undo when
it is looked up, so the real one must exist.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import pkgutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chaos_ext._core.failpoint import failpoint
from chaos_ext._core.ledger.entry import Entry
from chaos_ext._core.ledger.kinds import FaultKind, UndoHandler
from chaos_ext._core.ledger.machine import machine_note
from chaos_ext.errors import LedgerError, RollbackFailed

if TYPE_CHECKING:
    from chaos_ext._core.ledger import Ledger

__all__ = [
    "FAULT_KINDS",
    "FaultKinds",
    "UndoHandler",
    "UndoOutcome",
    "undo_claimed",
    "undo_unrecorded",
]

Swap = Callable[[UndoHandler], UndoHandler]
_ROOT = "chaos_ext"


class FaultKinds:
    """Every declared fault kind by name; thread safe. One instance: :data:`FAULT_KINDS`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kinds: dict[str, FaultKind] = {}
        self._swaps: dict[str, Swap] = {}

    def declare(self, *kinds: FaultKind) -> None:
        """Declare ``kinds`` (a name declared again is replaced: the last one wins)."""
        with self._lock:
            for kind in kinds:
                self._kinds[kind.name] = kind

    def register(self, name: str) -> Callable[[UndoHandler], UndoHandler]:
        """A decorator declaring kind ``name`` with only its undo (tests' own kinds)."""

        def add(func: UndoHandler) -> UndoHandler:
            self.declare(FaultKind(name=name, summary=func.__doc__ or name, undo=func))
            return func

        return add

    def kinds(self) -> list[str]:
        """The names declared so far (by the modules imported so far), sorted."""
        with self._lock:
            return sorted(self._kinds)

    def get(self, name: str) -> FaultKind | None:
        with self._lock:
            return self._kinds.get(name)

    def declared(self) -> list[FaultKind]:
        """The kinds declared so far, by name."""
        with self._lock:
            return [self._kinds[k] for k in sorted(self._kinds)]

    def load_all(self) -> list[FaultKind]:
        """Import every package's ``kinds`` module; every kind of chaos_ext, by name."""
        root = importlib.import_module(_ROOT)
        for info in pkgutil.iter_modules(root.__path__):
            if info.ispkg and importlib.util.find_spec(f"{_ROOT}.{info.name}.kinds"):
                importlib.import_module(f"{_ROOT}.{info.name}.kinds")
        return [k for k in self.declared() if k.undo.__module__.startswith(f"{_ROOT}.")]

    def for_action(self, module: str, func: str) -> FaultKind | None:
        """The kind the fault action ``module.func`` records (None: not a fault action)."""
        package = module.rpartition(".")[0]
        if not package.startswith(f"{_ROOT}."):  # another library's function: no kind
            return None
        with contextlib.suppress(ImportError):
            importlib.import_module(f"{package}.kinds")
        return next((k for k in self.declared() if k.module == module and func in k.actions), None)

    def registered(self, name: str) -> UndoHandler | None:
        """The undo declared for ``name`` (never a swapped one); None if there is none."""
        kind = self.get(name)
        return kind.undo if kind is not None else None

    def _load_for(self, entry: Entry) -> None:
        try:
            importlib.import_module(entry.module)
        except ImportError as exc:
            raise RollbackFailed(
                f"cannot import {entry.module!r} to undo {entry.kind} on {entry.target}: {exc}"
            ) from exc
        package = entry.module.rpartition(".")[0]
        if self.get(entry.kind) is None and package:
            with contextlib.suppress(ModuleNotFoundError):
                importlib.import_module(f"{package}.kinds")

    def handler_for(self, entry: Entry) -> UndoHandler:
        """The undo of ``entry``'s kind, importing its module and its ``kinds`` if needed.

        Raises RollbackFailed when that module cannot be imported or declares
        no such kind.
        """
        if self.get(entry.kind) is None:
            self._load_for(entry)
        with self._lock:
            kind, swap = self._kinds.get(entry.kind), self._swaps.get(entry.kind)
        if kind is None:
            raise RollbackFailed(
                f"no fault kind {entry.kind!r} declared by {entry.module} or its kinds module"
            )
        return swap(kind.undo) if swap is not None else kind.undo

    def swap(self, name: str, replace: Swap) -> Callable[[], None]:
        """From now on, ``name``'s undo is ``replace(declared undo)``; returns the
        function that undoes the swap. Tests only: see :meth:`swapped`."""
        with self._lock:
            previous = self._swaps.get(name)
            self._swaps[name] = replace

        def restore() -> None:
            with self._lock:
                if previous is None:
                    self._swaps.pop(name, None)
                else:
                    self._swaps[name] = previous

        return restore

    @contextlib.contextmanager
    def swapped(self, name: str, replace: Swap) -> Iterator[None]:
        """:meth:`swap` for the ``with`` block; the undo in force before comes back after."""
        restore = self.swap(name, replace)
        try:
            yield
        finally:
            restore()


FAULT_KINDS = FaultKinds()
"""Every fault kind, declared by ``chaos_ext/<domain>/kinds.py``."""


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
    note = machine_note(entry) or FAULT_KINDS.handler_for(entry)(entry) or "undone"
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
