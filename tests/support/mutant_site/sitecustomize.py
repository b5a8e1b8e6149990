"""Test-only: one fault kind's undo handler becomes a no-op (the mutation check, issue 34).

Python runs this at start-up only when this folder is on ``PYTHONPATH``, which
``tests/test_mutation.py`` (``make mutate``) arranges, and ``support.harness``
passes on to the CLIs it starts while ``GAMEDAY_MUTANT_UNDO`` is set. It is not
in the package and never ships. With ``GAMEDAY_MUTANT_UNDO=<kind>``, the
declared kinds (``chaos_ext._core.ledger.FAULT_KINDS``)
hands out, for that kind, an undo that does nothing and says it succeeded, so
the entry closes while the fault stays injected. Each call appends a line to
``GAMEDAY_MUTANT_LOG``: the check counts a test as catching the mutant only if
the mutant actually ran.

With ``GAMEDAY_MUTANT_ROLLBACK=<module>:<func>`` (a rollback activity, e.g.
``chaos_ext.network.actions:remove_latency``), that activity becomes a no-op
with the same signature and role, which undoes nothing and says so
(``{"undone": 0, "faults": [], "left_alone": []}``); calls are logged the same way.
"""

from __future__ import annotations

import functools
import importlib
import os
from typing import Any

_KIND = os.environ.get("GAMEDAY_MUTANT_UNDO", "")
_ROLLBACK = os.environ.get("GAMEDAY_MUTANT_ROLLBACK", "")


def _log(line: str) -> None:
    log = os.environ.get("GAMEDAY_MUTANT_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"{os.getpid()} {line}\n")


def _install(kind: str) -> None:
    from chaos_ext._core import ledger  # noqa: PLC0415 - only when the mutation is asked for

    def noop(entry: Any) -> str:
        _log(f"{entry.kind} {entry.id}")
        return "mutant undo: did nothing"

    # for the whole process: the registry swaps in the no-op only once the real one exists
    ledger.FAULT_KINDS.swap(kind, lambda real: noop)


def _install_rollback(spec: str) -> None:
    """Replace the rollback activity ``module:func`` in its module (before anyone imports it)."""
    module_name, func = spec.split(":")
    module = importlib.import_module(module_name)
    real = getattr(module, func)

    @functools.wraps(real)  # the signature, docstring and declared role stay the real ones
    def noop(*args: Any, **kwargs: Any) -> dict[str, Any]:
        _log(f"rollback {spec}")
        return {"undone": 0, "faults": [], "left_alone": []}

    setattr(module, func, noop)


if _KIND:
    _install(_KIND)
if _ROLLBACK:
    _install_rollback(_ROLLBACK)
