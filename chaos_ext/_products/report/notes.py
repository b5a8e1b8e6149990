"""What a run's outcome does not say alone, read from its journal (pure).

Method activities with a failing result, the failing results the experiment
accepts (gameday extension ``accept_failures``), the safety controls a run went
without (``--allow-missing-controls``), rollbacks that failed and were then
retried successfully (``gameday rollback --journal``), why a batch did not
start an experiment, an ungraceful exit, and why no rollback ran.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from chaos_ext._products.report.series import as_number, parse_time
from chaos_ext._runner.verdict import accepted_failures, failing_result, method_failures

__all__ = ["clock", "notes_part", "recovery_line"]


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value or [] if isinstance(item, Mapping)]


def clock(at: Any) -> str:
    when = as_number(at) or parse_time(at)
    if when is None:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(when))


def _accepted(journal: Mapping[str, Any]) -> tuple[str, ...]:
    names = accepted_failures(journal)
    found = []
    for phase in ("run", "rollbacks"):
        for run in _mappings(journal.get(phase)):
            name = str((run.get("activity") or {}).get("name", "?"))
            why = failing_result(run)
            if why is not None and name in names:
                found.append(f"'{name}' {why}")
    return tuple(found)


def notes_part(journal: Mapping[str, Any]) -> dict[str, Any]:
    """What the outcome does not say alone: failures, accepted ones, unprotected runs,
    retries, why a run did not start or how it ended."""
    gameday = journal.get("gameday") or {}
    retries = _mappings(gameday.get("rollback_retries"))
    return {
        "failures": tuple(method_failures(journal)),
        "accepted": _accepted(journal),
        "unprotected": tuple(str(u) for u in gameday.get("unprotected") or []),
        "retried": tuple(r for r in retries if r.get("status") == "succeeded"),
        "not_run": str(gameday.get("not_run") or ""),
        "ended": str(gameday.get("ended") or ""),
        "rollbacks_skipped": str(gameday.get("rollbacks_skipped") or ""),
        "recovery": recovery if isinstance(recovery := gameday.get("recovery"), Mapping) else None,
    }


def recovery_line(recovery: Mapping[str, Any] | None) -> str:
    """How the system came back after the undo, in one line ("" when not checked)."""
    if not recovery or not recovery.get("checked"):
        why = (recovery or {}).get("why")
        return f"recovery not checked: {why}" if why and "off" not in str(why) else ""
    if recovery.get("recovered"):
        return (
            f"recovered {recovery.get('time_to_recover_s')} s after the undo "
            f"({recovery.get('attempts')} check(s))"
        )
    return (
        f"not recovered: the fault was removed, but the system did not return to its "
        f"steady state within {recovery.get('seconds'):g} s ({recovery.get('last')})"
    )
