"""The shape every activity shares (docs/conventions.md): types, roles, the rollback result.

* :data:`Configuration` and :data:`Secrets` type the two arguments chaoslib
  injects by name; every activity takes them, last, defaulting to None.
* Every action has one role, declared where it is defined:
  :func:`fault_action` (it records a fault in the ledger and names the
  rollback activity that undoes it), :func:`rollback_activity` (it undoes
  faults) or :func:`remedy_action` (it changes something on purpose that is
  not a fault and is not undone, with the reason).
* :func:`roll_back` is what a rollback activity does once it has found the
  open entries of its kind: keep those in its scope (this run's; with
  ``include_dead_runs`` also those of runs whose runner is dead; never a live
  run's), then :func:`undo_entries`.
* :func:`undo_entries` undoes ledger entries the way every rollback activity
  must: each one tried, failures raised together as
  :class:`~chaos_ext.errors.RollbackFailed` (the entries stay open for
  ``gameday rollback``), and the result in one shape::

      {"undone": 2,
       "faults": [{"ledger_id": "...", "kind": "netem", "target": "...", "note": "..."}],
       "left_alone": [{"ledger_id": "...", "run_id": "...", "reason": "..."}]}

* :func:`plan_function_of` finds the plan of a fault action through its
  declared :class:`~chaos_ext._core.ledger.FaultKind` (``FaultKind.actions``).
  A plan is written once with :func:`plan_for`: it takes the action's own
  signature (callers pass the action's arguments), gets them as a
  :class:`PlanCall` (defaults filled in, parsed by the action's own check),
  touches nothing, and returns :func:`plan_result`'s shape, with each
  preflight as :func:`preflight_check` builds it (docs/conventions.md §7).

``tests/test_conventions.py`` walks every activity and checks all of this;
``tests/test_conventions_behaviour.py`` runs every fault action against a real
target to check that it records before it acts and that its rollback undoes it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from chaos_ext._core.ledger import FAULT_KINDS, Entry, Ledger, in_scope, undo
from chaos_ext._core.validation import parsed_arguments
from chaos_ext.errors import RollbackFailed

__all__ = [
    "LEDGER_ID",
    "NET_ADMIN_CHECK",
    "PRIVILEGE_CHECKS",
    "ROLE_ATTRIBUTE",
    "Configuration",
    "PlanCall",
    "Secrets",
    "fault_action",
    "left_alone",
    "missing_privileges",
    "plan_for",
    "plan_function_of",
    "plan_result",
    "preflight_check",
    "remedy_action",
    "role_of",
    "roll_back",
    "rollback_activity",
    "undo_entries",
]

Configuration = Mapping[str, Any] | None
"""The experiment's configuration block, as chaoslib passes it (None outside chaoslib)."""
Secrets = Mapping[str, Any] | None
"""The secrets the provider asked for, as chaoslib passes them; never logged or returned."""

LEDGER_ID = "ledger_id"
"""The key under which an action returns the id of the ledger entry it recorded."""
ROLE_ATTRIBUTE = "__gameday_role__"

F = TypeVar("F", bound=Callable[..., Any])


def _with_role(role: dict[str, str]) -> Callable[[F], F]:
    def mark(func: F) -> F:
        setattr(func, ROLE_ATTRIBUTE, role)
        return func

    return mark


def fault_action(*, rollback: str) -> Callable[[F], F]:
    """Mark an action that records a fault; ``rollback`` names its rollback activity.

    The rollback activity lives in the same module. Put it in the
    experiment's ``rollbacks``; ``gameday run`` also sweeps the ledger.
    """
    return _with_role({"role": "fault", "rollback": rollback})


def rollback_activity(func: F) -> F:
    """Mark an action that undoes recorded faults (see :func:`undo_entries`)."""
    return _with_role({"role": "rollback"})(func)


def remedy_action(*, reason: str) -> Callable[[F], F]:
    """Mark an action that changes something on purpose and is not undone, saying why."""
    return _with_role({"role": "remedy", "reason": reason})


def role_of(func: Callable[..., Any]) -> dict[str, str] | None:
    """The role an action declared (None: undeclared)."""
    role = getattr(func, ROLE_ATTRIBUTE, None)
    return dict(role) if isinstance(role, Mapping) else None


def left_alone(entry: Entry, reason: str) -> dict[str, str]:
    """One item of a rollback result's ``left_alone`` list."""
    return {LEDGER_ID: entry.id, "run_id": entry.run_id, "reason": reason}


def undo_entries(
    entries: Iterable[Entry],
    book: Ledger | None = None,
    *,
    skipped: Iterable[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """Undo ``entries`` newest first; the rollback result, or RollbackFailed naming each failure.

    Every entry is tried even when one fails; the failed ones stay open in
    the ledger with their error. ``skipped`` are the entries the activity
    found but may not undo (another live run's), as built by :func:`left_alone`;
    an entry another rollback undid meanwhile is listed there too, not
    counted as undone here.
    """
    ordered = sorted(entries, key=lambda e: e.created_at, reverse=True)
    outcomes = [undo(entry, book) for entry in ordered]
    failed = [
        f"{o.entry.kind} on {o.entry.target} ({o.entry.id}): {o.note}" for o in outcomes if not o.ok
    ]
    if failed:
        raise RollbackFailed(
            "could not undo: " + "; ".join(failed) + " (left open: run `gameday rollback`)"
        )
    mine = [o for o in outcomes if o.undone_here]
    by_others = [left_alone(o.entry, o.note) for o in outcomes if not o.undone_here]
    return {
        "undone": len(mine),
        "faults": [
            {LEDGER_ID: o.entry.id, "kind": o.entry.kind, "target": o.entry.target, "note": o.note}
            for o in mine
        ],
        "left_alone": [*(dict(s) for s in skipped), *by_others],
    }


def roll_back(
    entries: Iterable[Entry], book: Ledger | None = None, *, include_dead_runs: bool = False
) -> dict[str, Any]:
    """Undo the ``entries`` in a rollback activity's scope; list the others as left alone.

    The scope is the ledger's (:func:`chaos_ext._core.ledger.in_scope`): this run's
    entries, plus dead runs' with ``include_dead_runs``, never a live run's.
    """
    found = list(entries)
    mine = in_scope(found, include_dead_runs=include_dead_runs)
    chosen = {e.id for e in mine}
    others = [
        left_alone(
            e,
            "its runner is alive: that run undoes it itself"
            if e.owner_alive()
            else "its runner is dead: pass include_dead_runs=true",
        )
        for e in found
        if e.id not in chosen
    ]
    return undo_entries(mine, book, skipped=others)


def plan_function_of(module: str, func: str) -> Callable[..., dict[str, Any]] | None:
    """The plan of the fault action ``module.func``, from the kind it declares (None: none).

    ``chaos_ext.db.actions`` / ``exhaust_connections`` -> the plan the ``db-connections``
    :class:`~chaos_ext._core.ledger.FaultKind` names for that action.
    """
    kind = FAULT_KINDS.for_action(module, func)
    return kind.plan_of(func) if kind is not None else None


@dataclass(frozen=True)
class PlanCall:
    """One plan call: the action's arguments (defaults filled in), what the action's own
    check parsed from them (None: it parses nothing), and what chaoslib injects."""

    arguments: dict[str, Any]
    parsed: Any
    configuration: Configuration
    secrets: Secrets


_INJECTED = ("configuration", "secrets")


def plan_for(
    action: Callable[..., Any],
) -> Callable[[Callable[[PlanCall], dict[str, Any]]], Callable[..., dict[str, Any]]]:
    """Write the plan of ``action`` once: the plan takes the action's own signature.

    ::

        @plan_for(limit_dns_rate)
        def plan_limit_dns_rate(call: PlanCall) -> dict[str, Any]: ...

        plan_limit_dns_rate(target="netns:app", pps=100)   # as the action is called

    The call is bound to the action's signature (a wrong argument is Python's
    TypeError, as for the action), the defaults are filled in, and the
    action's own check parses them once (the same parser the action and
    ``gameday validate`` use; an InvalidArgument leaves before the plan runs).
    """
    signature = inspect.signature(action)

    def wrap(body: Callable[[PlanCall], dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        @functools.wraps(body)
        def plan(*args: Any, **kwargs: Any) -> dict[str, Any]:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = {k: v for k, v in bound.arguments.items() if k not in _INJECTED}
            parsed = parsed_arguments(action, arguments)
            configuration = bound.arguments.get("configuration")
            return body(PlanCall(arguments, parsed, configuration, bound.arguments.get("secrets")))

        plan.__signature__ = signature  # type: ignore[attr-defined]
        del plan.__wrapped__  # its signature is the action's, not the body's
        return plan

    return wrap


def preflight_check(check: str, ok: bool, detail: str) -> dict[str, Any]:
    """One item of a plan's ``preflight`` list."""
    return {"check": check, "ok": bool(ok), "detail": detail}


NET_ADMIN_CHECK = "CAP_NET_ADMIN"
"""The preflight check of a fault that changes a network stack: may who changes it do so?"""

PRIVILEGE_CHECKS = frozenset({NET_ADMIN_CHECK})
"""Preflight checks that are about privileges (this process's, or the SSH user's), not the
target: one failing makes ``gameday run`` refuse before anything is injected (exit 3),
as a plan that raises :class:`~chaos_ext.errors.PrivilegeMissing` does."""


def missing_privileges(plan: Mapping[str, Any]) -> list[str]:
    """The failed privilege checks of a plan, one line each (empty: none missing)."""
    return [
        f"{check['check']}: {check['detail']}"
        for check in plan.get("preflight") or []
        if check["check"] in PRIVILEGE_CHECKS and not check["ok"]
    ]


def plan_result(
    *,
    action: str,
    targets: list[str],
    would: str,
    preflight: list[dict[str, Any]],
    blast_radius: Mapping[str, Any],
) -> dict[str, Any]:
    """What a plan function returns: JSON-friendly, the same keys for every domain."""
    return {
        "action": action,
        "targets": list(targets),
        "would": would,
        "preflight": [dict(p) for p in preflight],
        "blast_radius": dict(blast_radius),
    }
