"""Network latency actions: tc netem scoped to destinations, always undone exactly."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chaos_ext._core.contract import (
    LEDGER_ID,
    Configuration,
    Secrets,
    fault_action,
    roll_back,
    rollback_activity,
)
from chaos_ext._core.ledger import (
    Entry,
    default_ledger,
    fault,
    open_entries_on_machine,
    undo_after,
)
from chaos_ext._core.rbac import needs_k8s
from chaos_ext._core.targets.identity import NETNS_KEY, entries_on, namespace_key
from chaos_ext._core.targets.pod import RULES as POD_RULES
from chaos_ext._core.targets.remote import identity_of
from chaos_ext._core.targets.spec import LOCAL_KINDS, Target, parse_target
from chaos_ext._core.validation import PARSED, validated_by
from chaos_ext.errors import ChaosExtError, TargetGone
from chaos_ext.network import _connect, _spec, _sweep
from chaos_ext.network.errors import NetworkError

__all__ = ["add_latency", "remove_latency"]

KIND = "netem"


def _check_add(arguments: Mapping[str, Any]) -> _spec.LatencySpec:
    return _spec.check_latency_arguments(arguments)


def _check_remove(arguments: Mapping[str, Any]) -> None:
    _spec.check_remove_arguments(arguments)


@fault_action(rollback="remove_latency")
@validated_by(_check_add)
@needs_k8s(*POD_RULES)
def add_latency(
    interface: str,
    delay_seconds: float,
    destinations: list[str],
    ports: list[int] | None = None,
    jitter_seconds: float = 0,
    correlation: float = 0,
    loss: float = 0,
    duration_seconds: float = 0,
    target: str = "local",
    configuration: Configuration = None,
    secrets: Secrets = None,
    *,
    parsed: _spec.LatencySpec = PARSED,
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
    ``delay_seconds`` (0.15 for 150 ms) and ``jitter_seconds`` are seconds.
    With ``duration_seconds`` > 0 the delay is removed by itself after that long.
    A preflight checks the kernel (sch_htb, sch_netem, cls_u32) and
    CAP_NET_ADMIN first; if it fails nothing is changed. Returns the target,
    the delay and ``ledger_id``.
    """
    spec = parsed  # checked and parsed once, by @validated_by
    where = parse_target(target)
    label = where.label(interface)
    with _connect.executor_for(where, configuration, secrets) as (executor, connection):
        preflight = executor.preflight(interface)
        before = executor.snapshot(interface)
        if before.get("latency_active") or _is_latency_tree(before):
            raise NetworkError(f"{label} already has a latency fault: remove it first")
        recipe: dict[str, Any] = {
            "target": target,
            "interface": interface,
            "spec": spec.as_dict(),
            "snapshot": before,
            "connection": connection,
        }
        if where.kind in LOCAL_KINDS:  # which namespace, whatever the spelling
            recipe[NETNS_KEY] = namespace_key(where)
        identity = identity_of(connection)
        with fault(
            kind=KIND, target=label, recipe=recipe, module=__name__, identity=identity
        ) as entry:
            executor.apply(interface, spec)
    if duration_seconds:
        undo_after(entry, duration_seconds)
    return {
        "target": label,
        LEDGER_ID: entry.id,
        "kernel": preflight["kernel"],
        "previous_root": before.get("root_kind") or "kernel default",
        **spec.as_dict(),
        "duration_seconds": duration_seconds,
    }


def _is_latency_tree(snap: dict[str, Any]) -> bool:
    return any(
        i.get("type") == "qdisc" and i.get("handle") == _spec.ROOT_HANDLE
        for i in snap.get("items", [])
    )


@rollback_activity
@validated_by(_check_remove)
def remove_latency(
    interface: str = "",
    target: str = "",
    include_dead_runs: bool = False,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Remove the latency add_latency added and restore the previous qdisc tree exactly.

    Blast radius: the root qdisc of each delayed interface, put back to what
    the fault ledger saved before the delay, for this run's delays
    (``include_dead_runs``: also delays left by runs whose runner is dead);
    ``interface`` and ``target`` narrow it (empty: any). A delay that a live
    run added is never removed (listed under ``left_alone``). Idempotent:
    nothing recorded or already restored is fine. This is the rollback for
    ``add_latency``. Raises RollbackFailed if a tree could not be restored
    (the entry stays open for ``gameday rollback``). ``target`` matches
    entries by network namespace, however they spelled it (``netns:``,
    ``pid:``). With both ``interface`` and ``target`` given, a latency tree
    there that no open entry of any ledger on this machine refers to (the
    ledger was lost) is deleted and the kernel's default root comes back;
    ``unrecorded`` says what was done, or whose entry kept it. Entries found
    are undone from their recipes, which hold how to reach the target; when
    the rollback's own configuration cannot reach it to look for more,
    ``unrecorded`` says so instead of failing the undo that did succeed.
    """
    where = parse_target(target) if target else None
    book = default_ledger()
    recorded = [
        e
        for e in book.open_entries()
        if e.kind == KIND and (not interface or e.recipe.get("interface") == interface)
    ]
    if where is not None:
        recorded = entries_on(recorded, where)
    result = roll_back(recorded, book, include_dead_runs=include_dead_runs)
    if where is not None and interface:
        result["unrecorded"] = _remove_unrecorded(
            where, interface, configuration, secrets, undone_from_ledger=bool(recorded)
        )
    return result


def _remove_unrecorded(
    where: Target, interface: str, configuration: Configuration, secrets: Secrets,
    *, undone_from_ledger: bool = False,
) -> str:  # fmt: skip
    """Delete the latency tree on ``where``/``interface`` if no ledger's open entry owns it."""
    label = where.label(interface)
    try:
        return _sweep_unrecorded(where, interface, configuration, secrets, label)
    except ChaosExtError as exc:
        if not undone_from_ledger:
            raise  # nothing was undone: the caller must hear why
        return f"{label}: not looked at for an unrecorded tree ({exc})"


def _sweep_unrecorded(
    where: Target, interface: str, configuration: Configuration, secrets: Secrets, label: str
) -> str:
    try:
        with _connect.executor_for(where, configuration, secrets) as (executor, connection):
            snap = executor.snapshot(interface)  # before the census: a newer tree is not seen
            if not (snap.get("latency_active") or _is_latency_tree(snap)):
                return f"{label}: no latency tree"
            ssh = (identity_of(connection) or {}).get("ssh") or {}
            local = where.kind in LOCAL_KINDS
            place = _sweep.Place(
                interface, namespace_key(where) if local else None, ssh.get("host_key")
            )
            kept = _sweep.owner_note(label, open_entries_on_machine([KIND]), place)
            return kept or executor.remove_unrecorded(interface)
    except TargetGone as exc:
        return f"{label}: the target is gone, and any latency tree with it ({exc})"


def _undo_latency(entry: Entry) -> str:
    recipe = entry.recipe
    try:
        with _connect.executor_from_recipe(recipe) as executor:
            return executor.restore(recipe["interface"], recipe["snapshot"])
    except TargetGone as exc:
        return f"{entry.target}: target gone, so is the delay ({exc})"
