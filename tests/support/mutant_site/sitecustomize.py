"""Test-only: one fault kind's undo handler becomes a no-op (the mutation check, issue 34).

Python runs this at start-up only when this folder is on ``PYTHONPATH``, which
``tests/test_mutation.py`` (``make mutate``) arranges, and ``support.harness``
passes on to the CLIs it starts while ``GAMEDAY_MUTANT_UNDO`` is set. It is not
in the package and never ships. With ``GAMEDAY_MUTANT_UNDO=<kind>``, the
registry of :func:`chaos_ext._core.ledger.undo_handler` hands out, for that kind, an
undo that does nothing and says it succeeded, so the entry closes while the
fault stays injected. Each call appends a line to ``GAMEDAY_MUTANT_LOG``: the
check counts a test as catching the mutant only if the mutant actually ran.
"""

from __future__ import annotations

import os
from typing import Any

_KIND = os.environ.get("GAMEDAY_MUTANT_UNDO", "")


def _install(kind: str) -> None:
    from chaos_ext._core import ledger  # noqa: PLC0415 - only when the mutation is asked for

    def noop(entry: Any) -> str:
        log = os.environ.get("GAMEDAY_MUTANT_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as out:
                out.write(f"{os.getpid()} {entry.kind} {entry.id}\n")
        return "mutant undo: did nothing"

    class Mutant(dict[str, Any]):
        def __getitem__(self, key: str) -> Any:
            real = super().__getitem__(key)  # the real one must exist (its module imported)
            return noop if key == kind else real

    ledger._UNDO_HANDLERS = Mutant(ledger._UNDO_HANDLERS)


if _KIND:
    _install(_KIND)
