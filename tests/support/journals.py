"""Synthetic Chaos Toolkit journals with controlled content, in the shape `gameday run` writes.

Tolerances are judged by chaoslib itself (``within_tolerance``), and the
outcome by :func:`chaos_ext._runner.execute.outcome_of`, so a synthetic journal
says what a real run would have said about the same values.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from chaoslib.hypothesis import within_tolerance

from chaos_ext._runner.verdict import exit_code_for, outcome_of

__all__ = ["T0", "JournalBuilder", "iso"]

T0 = 1_800_000_000.0


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat()


def _probe(name: str, tolerance: Any, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "probe",
        "name": name,
        "tolerance": tolerance,
        "provider": {
            "type": "python",
            "module": "synthetic.probes",
            "func": name.replace("-", "_"),
            "arguments": arguments or {},
        },
    }


class JournalBuilder:
    """Add checks, activities and faults at offsets (seconds) from the start; then build()."""

    def __init__(
        self,
        title: str = "synthetic experiment",
        tolerances: dict[str, Any] | None = None,
        *,
        start: float = T0,
        weight: float | None = None,
        arguments: dict[str, dict[str, Any]] | None = None,
        secrets: dict[str, Any] | None = None,
    ) -> None:
        self.start = start
        self.tolerances = dict(tolerances or {})
        probes = [_probe(n, t, (arguments or {}).get(n)) for n, t in self.tolerances.items()]
        self.experiment: dict[str, Any] = {
            "title": title,
            "description": "built by tests/support/journals.py",
            "steady-state-hypothesis": {"title": "synthetic hypothesis", "probes": probes},
            "method": [],
            "rollbacks": [],
        }
        if weight is not None:
            self.experiment["extensions"] = [{"name": "gameday", "weight": weight}]
        if secrets is not None:
            self.experiment["secrets"] = secrets
        self.phases: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
        self.during: list[dict[str, Any]] = []
        self.runs: list[dict[str, Any]] = []
        self.rollbacks: list[dict[str, Any]] = []
        self.ledger: list[dict[str, Any]] = []
        self.recovery_record: dict[str, Any] | None = None
        self.last = 0.0

    def _run(
        self,
        activity: dict[str, Any],
        at: float,
        seconds: float,
        output: Any,
        status: str = "succeeded",
    ) -> dict[str, Any]:
        self.last = max(self.last, at + seconds)
        run = {
            "activity": copy.deepcopy(activity),
            "output": output,
            "start": iso(self.start + at),
            "status": status,
            "end": iso(self.start + at + seconds),
            "duration": seconds,
        }
        if status == "failed":
            run["exception"] = [f"ActivityFailed: {output}\n"]
            run["output"] = None
        return run

    def check(self, phase: str, probe: str, value: Any, at: float, seconds: float = 0.01) -> None:
        """One hypothesis probe evaluation; ``during`` checks form one sample each."""
        activity = next(
            p for p in self.experiment["steady-state-hypothesis"]["probes"] if p["name"] == probe
        )
        run = self._run(activity, at, seconds, value)
        run["tolerance_met"] = bool(within_tolerance(self.tolerances[probe], value, {}, {}))
        if phase == "during":
            self.during.append({"steady_state_met": run["tolerance_met"], "probes": [run]})
        else:
            self.phases[phase].append(run)

    def activity(
        self,
        name: str,
        at: float,
        seconds: float,
        output: Any = None,
        *,
        kind: str = "action",
        status: str = "succeeded",
        rollback: bool = False,
    ) -> None:
        spec = {
            "type": kind,
            "name": name,
            "provider": {"type": "python", "module": "synthetic.actions", "func": name},
        }
        (self.rollbacks if rollback else self.runs).append(
            self._run(spec, at, seconds, output, status)
        )
        (self.experiment["rollbacks"] if rollback else self.experiment["method"]).append(spec)

    def fault(self, kind: str, target: str, at: float, until: float | None) -> None:
        self.ledger.append(
            {
                "id": f"{len(self.ledger):016x}",
                "kind": kind,
                "target": target,
                "run_id": "synthetic",
                "owner_pid": 1,
                "created_at": self.start + at,
                "state": "closed" if until is not None else "open",
                "closed_at": self.start + until if until is not None else None,
                "note": "undone" if until is not None else None,
                "last_error": None,
            }
        )

    def recovery(self, undone_at: float, seconds: float, took: float | None) -> None:
        """The ``gameday.recovery`` record of ``gameday run`` (``_poll`` in
        chaos_ext/_runner/recovery.py): the last undo at offset ``undone_at``, the
        hypothesis held again ``took`` s later, or (None) not within ``seconds``."""
        self.recovery_record = {
            "seconds": seconds,
            "checked": True,
            "recovered": took is not None,
            "undone_at": self.start + undone_at,
            "time_to_recover_s": took,
            "attempts": 1 if took is not None else int(seconds) + 1,
            "last": "met" if took is not None else "out of tolerance: synthetic",
        }

    def _state(self, phase: str) -> dict[str, Any] | None:
        runs = self.phases[phase]
        if not runs:
            return None
        return {"steady_state_met": all(r["tolerance_met"] for r in runs), "probes": runs}

    def build(self, status: str = "completed") -> dict[str, Any]:
        before, after = self._state("before"), self._state("after")
        deviated = any(
            not s["steady_state_met"] for s in [before, after, *self.during] if s is not None
        )
        journal: dict[str, Any] = {
            "chaoslib-version": "1.44.0",
            "experiment": copy.deepcopy(self.experiment),
            "start": iso(self.start),
            "status": status,
            "deviated": deviated,
            "steady_states": {"before": before, "after": after, "during": self.during},
            "run": self.runs,
            "rollbacks": self.rollbacks,
            "end": iso(self.start + self.last + 0.01),
            "duration": self.last + 0.01,
        }
        if self.recovery_record is not None:  # the outcome reads it (not-recovered)
            journal["gameday"] = {"recovery": dict(self.recovery_record)}
        outcome = outcome_of(journal)
        journal["gameday"] = {
            **journal.get("gameday", {}),
            "run_id": "synthetic",
            "experiment_path": "synthetic.json",
            "outcome": outcome,
            "exit_code": exit_code_for(outcome),
            "ledger": self.ledger,
            "sweep": [],
        }
        return journal
