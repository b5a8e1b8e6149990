"""What gameday left in the system, as found by looking at the system itself.

A fault domain's scan (``chaos_ext.<domain>.leftovers``) lists the objects of
gameday's that it finds (an nft table by its name, a helper by its token, a
qdisc tree by its handle, a node by its cordon annotation...) as
:class:`Leftover` values, without reading any ledger. Whose each one is, is
decided afterwards from every ledger of the machine
(``chaos_ext._runner.orphans``): an open entry that refers to it owns it; an
object no open entry refers to is an orphan. An orphan is undone by
recording its :class:`Adoption` as a new entry of the current ledger and
undoing that entry with the kind's own undo handler, so the ledger keeps
what was done.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chaos_ext._core.ledger.entry import Entry

__all__ = ["Adoption", "Leftover"]


@dataclass(frozen=True)
class Adoption:
    """The ledger entry that undoes an orphan: recorded, then undone by ``kind``'s handler."""

    kind: str
    module: str
    target: str
    recipe: dict[str, Any]
    identity: dict[str, Any] | None = None
    entry_id: str | None = None  # the id the object names, when its undo checks it


@dataclass(frozen=True)
class Leftover:
    """One object of gameday's in the system.

    ``ref`` names it for people and for ``--only`` (stable between two scans);
    ``refers(entry)`` says whether an open entry refers to it.
    """

    ref: str
    kind: str
    what: str
    adoption: Adoption
    refers: Callable[[Entry], bool] = field(compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {"ref": self.ref, "kind": self.kind, "what": self.what}
