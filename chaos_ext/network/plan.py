"""Plan of the latency fault: where ``add_latency`` would delay, and the qdisc tree it replaces.

The permissions first (``targets.access``: CAP_NET_ADMIN here, or SSH
reachability and the SSH user's CAP_NET_ADMIN on a remote target), then the
same target resolution and preflight as the action (``_connect.executor_for``)
and a read of the interface's root qdisc tree; nothing is applied and nothing
is recorded in the ledger. Reading qdiscs works on a kernel without netem:
the missing features are a failed preflight, not an error.
"""

from __future__ import annotations

from typing import Any

from chaos_ext._core.contract import PlanCall, plan_for, plan_result, preflight_check
from chaos_ext._core.targets.access import reached, target_checks
from chaos_ext._core.targets.spec import parse_target
from chaos_ext.errors import ChaosExtError
from chaos_ext.network import _connect, _spec
from chaos_ext.network.actions import _is_latency_tree, add_latency

__all__ = ["plan_add_latency"]


def _tree_summary(snap: dict[str, Any]) -> list[str]:
    """``qdisc noqueue 0:0 parent ffffffff``-like lines: what the fault would replace."""
    return [
        f"{i.get('type')} {i.get('kind')} {_spec.handle_text(int(i.get('handle') or 0))}"
        f" parent {_spec.handle_text(int(i.get('parent') or 0))}"
        for i in snap.get("items", [])
    ]


@plan_for(add_latency)
def plan_add_latency(call: PlanCall) -> dict[str, Any]:
    """Where ``add_latency`` would delay and the root qdisc it would replace; changes nothing."""
    spec: _spec.LatencySpec = call.parsed  # checked and parsed once, by the action's own check
    interface, target = call.arguments["interface"], call.arguments["target"]
    configuration, secrets = call.configuration, call.secrets
    where = parse_target(target)
    label = where.label(interface)
    checks = target_checks(where, configuration, secrets)  # CAP_NET_ADMIN, SSH reachable
    radius: dict[str, Any] = {
        "target": where.where,
        "interface": interface,
        **spec.as_dict(),
        "duration_seconds": call.arguments["duration_seconds"],
    }

    def delay_nothing(why: str) -> dict[str, Any]:
        return plan_result(
            action="add_latency",
            targets=[label],
            would=f"delay nothing: the target cannot be {why}",
            preflight=checks,
            blast_radius=radius,
        )

    if not reached(where, checks):
        return delay_nothing("reached")
    try:
        with _connect.executor_for(where, configuration, secrets) as (executor, _connection):
            try:
                info = executor.preflight(interface)
                checks.append(
                    preflight_check(
                        "kernel and CAP_NET_ADMIN",
                        True,
                        f"kernel {info.get('kernel')}: {', '.join(info.get('features', []))}",
                    )
                )
            except ChaosExtError as exc:
                checks.append(preflight_check("kernel and CAP_NET_ADMIN", False, str(exc)))
            before = executor.snapshot(interface)
    except ChaosExtError as exc:
        checks.append(preflight_check("target", False, str(exc)))
        return delay_nothing("read")
    present = bool(before.get("latency_active")) or _is_latency_tree(before)
    checks.append(
        preflight_check(
            "no latency fault there yet",
            not present,
            f"{label} already has a latency tree: remove it first"
            if present
            else f"{label} has none",
        )
    )
    previous = before.get("root_kind") or "kernel default"
    radius.update({"replaces_root": previous, "current_tree": _tree_summary(before)})
    scope = ", ".join(radius["destinations"]) + (
        f" ports {', '.join(str(p) for p in spec.ports)}" if spec.ports else ""
    )
    return plan_result(
        action="add_latency",
        targets=[label],
        would=f"replace the root qdisc of {label} ({previous}) with htb+netem delaying"
        f" {spec.delay_seconds * 1000:g} ms towards {scope}",
        preflight=checks,
        blast_radius=radius,
    )
