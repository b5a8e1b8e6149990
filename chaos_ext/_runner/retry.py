"""Retry the rollbacks of a run that did not complete them (``gameday rollback --journal``).

Chaos Toolkit rollback activities are not in the fault ledger (they are the
experiment's own), so after a ``rollback-failed`` run the only record of what
is left to undo is the journal. This re-runs, through chaoslib, every rollback
activity of the journal's experiment whose recorded status was not
``succeeded``, with configuration and secrets loaded exactly as ``gameday run``
loads them, and records each attempt in the journal (``gameday.rollback_retries``)
so that reports stop naming a rollback once a retry has succeeded.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chaoslib.activity import execute_activity
from chaoslib.configuration import load_configuration
from chaoslib.run import EventHandlerRegistry
from chaoslib.secret import load_secrets

from chaos_ext._runner.redact import Redactor, secret_values
from chaos_ext._runner.verdict import accepted_failures, failing_result

__all__ = ["Retried", "pending_rollbacks", "retry_rollbacks"]


class Retried(dict[str, Any]):
    """One retried rollback: ``name``, ``status``, ``error``, ``at``."""


def _retried_ok(journal: Mapping[str, Any]) -> set[str]:
    retries = (journal.get("gameday") or {}).get("rollback_retries") or []
    return {str(r.get("name")) for r in retries if r.get("status") == "succeeded"}


def pending_rollbacks(journal: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The experiment's rollback activities that did not succeed (nor on a retry)."""
    done = _retried_ok(journal) | accepted_failures(journal)
    failed = {
        str((run.get("activity") or {}).get("name"))
        for run in journal.get("rollbacks") or []
        if failing_result(run) is not None
    }
    declared = _resolved_rollbacks(journal.get("experiment") or {})
    return [a for a in declared if a.get("name") in failed and a.get("name") not in done]


def _resolved_rollbacks(experiment: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The experiment's rollbacks, a ``{"ref": name}`` replaced by the activity it names
    (of the hypothesis or the method, as chaoslib resolves refs), so that it is retried."""
    hypothesis = experiment.get("steady-state-hypothesis") or {}
    named = {
        a["name"]: a
        for a in [*(hypothesis.get("probes") or []), *(experiment.get("method") or [])]
        if isinstance(a, dict) and "ref" not in a and a.get("name")
    }
    return [
        named.get(a["ref"], a) if "ref" in a else a
        for a in experiment.get("rollbacks") or []
        if isinstance(a, dict)
    ]


def retry_rollbacks(
    journal_path: Path,
    config_vars: Mapping[str, Any] | None = None,
    secret_vars: Mapping[str, Any] | None = None,
) -> list[Retried]:
    """Run the pending rollbacks of ``journal_path`` again; record the attempts in it."""
    journal: dict[str, Any] = json.loads(journal_path.read_text())
    experiment = journal.get("experiment") or {}
    configuration = load_configuration(experiment.get("configuration", {}), dict(config_vars or {}))
    secrets = load_secrets(experiment.get("secrets", {}), configuration, dict(secret_vars or {}))
    redactor = Redactor(secret_values(secrets))
    attempts: list[Retried] = []
    for activity in pending_rollbacks(journal):
        run = execute_activity(
            experiment, activity, configuration, secrets, None, EventHandlerRegistry()
        )
        why = failing_result(run)  # a process exiting 1 "succeeded" for chaoslib
        attempts.append(
            Retried(
                name=activity.get("name"),
                status="failed" if why else "succeeded",
                error=redactor.text(why) if why else None,
                at=time.time(),
            )
        )
    if attempts:
        gameday = journal.setdefault("gameday", {})
        gameday["rollback_retries"] = [*(gameday.get("rollback_retries") or []), *attempts]
        tmp = journal_path.with_name(f".{journal_path.name}.tmp")
        tmp.write_text(json.dumps(journal, indent=2, default=str))
        tmp.replace(journal_path)
    return attempts
