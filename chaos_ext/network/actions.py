"""Network latency actions: tc netem scoped to destinations, always undone exactly."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chaos_ext._targets.pod import RULES as POD_RULES
from chaos_ext._targets.remote import identity_of
from chaos_ext.errors import NetworkError, TargetGone
from chaos_ext.ledger import (
    Entry,
    default_ledger,
    fault,
    in_scope,
    undo,
    undo_after,
    undo_handler,
)
from chaos_ext.network import _connect, _spec
from chaos_ext.rbac import needs_k8s
from chaos_ext.validation import validated_by

__all__ = ["add_latency", "remove_latency"]

KIND = "netem"


def _check_add(arguments: Mapping[str, Any]) -> None:
    _spec.check_latency_arguments(arguments)


def _check_remove(arguments: Mapping[str, Any]) -> None:
    _spec.check_target_arguments(arguments)


@validated_by(_check_add)
@needs_k8s(*POD_RULES)
def add_latency(
    interface: str,
    delay_ms: float,
    destinations: list[str],
    ports: list[int] | None = None,
    jitter_ms: float = 0,
    correlation: float = 0,
    loss: float = 0,
    duration: float = 0,
    target: str = "local",
    configuration: dict[str, Any] | None = None,
    secrets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Delay traffic to the given destinations (CIDRs, optional ports) with tc netem.

    Blast radius: packets leaving ``interface`` of ``target`` towards
    ``destinations`` (and ``ports``); other traffic is not delayed. Target is
    ``local``, ``netns:NAME``, ``pid:PID`` (that process's network namespace),
    ``ssh:HOST[:PORT]`` (a node; SSH settings from secrets/configuration) or
    ``pod:NAMESPACE/NAME[/CONTAINER]`` (the pod's namespace on its node, via
    SSH; needs get pods/nodes). The previous root qdisc tree is saved in the
    fault ledger before anything changes and restored exactly by
    ``remove_latency`` (pair it as the rollback) or ``gameday rollback``.
    With ``duration`` > 0 the delay is removed by itself after that many seconds.
    A preflight checks the kernel (sch_htb, sch_netem, cls_u32) and
    CAP_NET_ADMIN first; if it fails nothing is changed.
    """
    arguments = {
        "interface": interface, "delay_ms": delay_ms, "destinations": destinations,
        "ports": ports, "jitter_ms": jitter_ms, "correlation": correlation, "loss": loss,
        "duration": duration, "target": target,
    }  # fmt: skip
    spec = _spec.check_latency_arguments(arguments)
    where = _spec.parse_target(target)
    label = where.label(interface)
    with _connect.executor_for(where, configuration, secrets) as (executor, connection):
        preflight = executor.preflight(interface)
        before = executor.snapshot(interface)
        if before.get("latency_active") or _is_latency_tree(before):
            raise NetworkError(f"{label} already has a latency fault: remove it first")
        recipe = {
            "target": target, "interface": interface, "spec": spec.as_dict(),
            "snapshot": before, "connection": connection,
        }  # fmt: skip
        identity = identity_of(connection)
        with fault(
            kind=KIND, target=label, recipe=recipe, module=__name__, identity=identity
        ) as entry:
            executor.apply(interface, spec)
    if duration:
        undo_after(entry, duration)
    return {
        "target": label, "ledger_entry": entry.id, "kernel": preflight["kernel"],
        "previous_root": before.get("root_kind") or "kernel default", **spec.as_dict(),
        "duration": duration,
    }  # fmt: skip


def _is_latency_tree(snap: dict[str, Any]) -> bool:
    return any(
        i.get("type") == "qdisc" and i.get("handle") == _spec.ROOT_HANDLE
        for i in snap.get("items", [])
    )


@validated_by(_check_remove)
def remove_latency(
    interface: str,
    target: str = "local",
    include_dead_runs: bool = False,
    configuration: dict[str, Any] | None = None,
    secrets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Remove latency added by add_latency and restore the previous qdisc tree exactly.

    Blast radius: the root qdisc of ``interface`` on ``target``, put back to
    what the fault ledger saved before the delay, for this run's delays
    (``include_dead_runs``: also delays left by runs whose runner is dead).
    A delay that a live run added is never removed. Idempotent: nothing
    recorded or already restored is fine. This is the rollback for
    ``add_latency``. If the ledger has no entry at all for the interface (it
    was lost) but the latency tree is there, the tree is deleted and the
    kernel's default root comes back.
    """
    where, _ = _spec.check_target_arguments({"interface": interface, "target": target})
    label = where.label(interface)
    book = default_ledger()
    recorded = [e for e in book.open_entries() if e.kind == KIND and e.target == label]
    entries = in_scope(recorded, include_dead_runs=include_dead_runs)
    notes = []
    for entry in reversed(entries):
        outcome = undo(entry, book)
        if not outcome.ok:
            raise NetworkError(f"could not restore {label}: {outcome.note}")
        notes.append(outcome.note)
    others = [e for e in recorded if e not in entries]
    if others:
        notes += [f"left {e.id} alone: it belongs to run {e.run_id}" for e in others]
    elif not entries:
        with _connect.executor_for(where, configuration, secrets) as (executor, _):
            notes.append(executor.remove_unrecorded(interface))
    return {"target": label, "restored": len(entries), "notes": notes}


@undo_handler(KIND)
def _undo_latency(entry: Entry) -> str:
    recipe = entry.recipe
    try:
        with _connect.executor_from_recipe(recipe) as executor:
            return executor.restore(recipe["interface"], recipe["snapshot"])
    except TargetGone as exc:
        return f"{entry.target}: target gone, so is the delay ({exc})"
