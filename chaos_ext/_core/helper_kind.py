"""Helper processes left behind, found by their token: the ``helpers`` part of the scan.

A fault held by a helper process (:mod:`chaos_ext._core.helper`: TCP holds,
flood workers, connection holders, local load) carries its ledger entry's id
(16 hex characters) in ``GAMEDAY_HELPER_TOKEN``. :data:`HELPERS` is the scan
every such kind declares; an orphan is undone as a ``helper-orphan`` entry
(:data:`HELPER_ORPHAN`): its processes are stopped. The sandbox's own
services carry ``sandbox-<prefix>`` (``gameday sandbox down`` removes them)
and are not faults.
"""

from __future__ import annotations

import os
import re

from chaos_ext._core import helper as _helper
from chaos_ext._core import procfs as _procfs
from chaos_ext._core.ledger import FAULT_KINDS, LOCAL, Adoption, Entry, FaultKind, Leftover, Scan

__all__ = ["HELPERS", "HELPER_ORPHAN", "HELPER_ORPHAN_KIND", "find_helper_leftovers"]

HELPER_ORPHAN_KIND = "helper-orphan"
_ENTRY_ID = re.compile(r"^[0-9a-f]{16}$")


def _helper_leftover(token: str, pids: list[int]) -> Leftover:
    argv = _procfs.cmdline(pids[0])
    module = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else (argv[0] if argv else "?")

    def refers(entry: Entry) -> bool:
        return entry.id == token

    return Leftover(
        ref=f"helper:{token}",
        kind="helper",
        what=f"helper {module} pid {', '.join(map(str, pids))} (GAMEDAY_HELPER_TOKEN={token})",
        adoption=Adoption(
            kind=HELPER_ORPHAN_KIND,
            module=__name__,
            target=f"helper {module} {token}",
            recipe={"token": token, "pids": pids, "module": module},
        ),
        refers=refers,
    )


def find_helper_leftovers() -> tuple[list[Leftover], list[str]]:
    """Every live helper process that holds a fault on this machine, by its token."""
    mine = os.getpid()
    found = {t: p for t, p in _helper.all_helpers().items() if _ENTRY_ID.match(t) and mine not in p}
    return [_helper_leftover(token, pids) for token, pids in sorted(found.items())], []


def undo_helper(entry: Entry) -> str:
    """Stop the helper processes with this token (as every helper-held fault's undo does)."""
    token = str(entry.recipe["token"])
    stopped = _helper.stop_helpers(token)
    if not stopped:
        return f"helper {token} already gone"
    return f"stopped {stopped} helper process(es) with token {token}"


HELPERS = Scan(
    "helpers",
    "helper processes by GAMEDAY_HELPER_TOKEN=<ledger entry id>, on this machine",
    LOCAL,
    find_helper_leftovers,
)
HELPER_ORPHAN = FaultKind(
    name=HELPER_ORPHAN_KIND,
    summary="a helper process no ledger entry owns: stopped by gameday rollback --orphans",
    undo=undo_helper,
    role="adoption",
    scan=HELPERS,
    adopts="every helper-held kind",
    docs="docs/ledger.md",
)
FAULT_KINDS.declare(HELPER_ORPHAN)
