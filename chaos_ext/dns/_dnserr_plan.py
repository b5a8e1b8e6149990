"""The plan of inject_dns_errors: which names, which error, which resolvers, which namespace.

Touches nothing: it checks the arguments as the action does, reads the
target's resolv.conf when no resolvers are given (as the action would), and
lists the target's tables of ours (a second injection is refused); on a node
(``ssh:``, ``pod:``) it also asks what the action's preflight asks there
(CAP_NET_ADMIN, ``nft``, ``python3``). No ledger entry, no proxy, no table.
"""

from __future__ import annotations

import os
from typing import Any

from chaos_ext._core.contract import Configuration, Secrets, plan_result, preflight_check
from chaos_ext._core.targets.access import reached, target_checks
from chaos_ext._core.targets.identity import namespace_key
from chaos_ext._core.targets.spec import LOCAL_KINDS, netns_path
from chaos_ext.dns import _dnserr, _dnserr_remote, _dnserr_rules, _dnserr_system, _nft
from chaos_ext.errors import ChaosExtError

__all__ = ["plan_of"]


def _resolvers_check(where: Any, resolvers: list[str]) -> dict[str, Any]:
    return preflight_check(
        "resolvers known",
        bool(resolvers),
        ", ".join(resolvers)
        or f"none in {' or '.join(_dnserr.resolv_conf_paths(where))}: give resolvers=[...]",
    )


def _tables_check(runner: _nft.NftRunner) -> dict[str, Any]:
    try:
        present = _dnserr_system.list_tables(runner)
    except ChaosExtError as exc:
        return preflight_check("nftables", False, str(exc))
    detail = f"already injected ({', '.join(present)}): remove it first" if present else "none"
    return preflight_check("no DNS errors injected there yet", not present, detail)


def _local(spec: _dnserr.ErrorSpec) -> tuple[list[str], list[dict[str, Any]]]:
    """(resolvers, checks) of a target on this machine."""
    where = spec.target
    resolvers = [str(r) for r in spec.resolvers or _dnserr_system.read_resolvers(where)]
    path = netns_path(where)
    if path is not None and not os.path.exists(path):
        missing = preflight_check("target exists", False, f"{path} is missing")
        return resolvers, [_resolvers_check(where, resolvers), missing]
    return resolvers, [_resolvers_check(where, resolvers), _tables_check(_nft.LocalNft(where))]


def _on_node(
    spec: _dnserr.ErrorSpec, configuration: Configuration, secrets: Secrets
) -> tuple[list[str], list[dict[str, Any]]]:
    """(resolvers, checks) of a node or a pod on it: what the action's preflight asks there."""
    resolvers = [str(r) for r in spec.resolvers]
    try:
        with _dnserr_remote.node_side(spec.target, configuration, secrets) as side:
            resolvers = resolvers or [str(r) for r in side.resolvers()]
            side.preflight()
            ready = preflight_check("nft, python3 and CAP_NET_ADMIN on the node", True, side.where)
            tables = _tables_check(side.runner)
    except ChaosExtError as exc:
        failed = preflight_check("nft, python3 and CAP_NET_ADMIN on the node", False, str(exc))
        return resolvers, [_resolvers_check(spec.target, resolvers), failed]
    return resolvers, [_resolvers_check(spec.target, resolvers), ready, tables]


def plan_of(
    spec: _dnserr.ErrorSpec, configuration: Configuration = None, secrets: Secrets = None
) -> dict[str, Any]:
    """What ``inject_dns_errors`` would do with ``spec`` (its arguments, parsed by the
    action's own check); does nothing."""
    where = spec.target
    checks = target_checks(where, configuration, secrets)  # CAP_NET_ADMIN, SSH reachable
    if where.kind in LOCAL_KINDS:
        resolvers, found = _local(spec)
    elif reached(where, checks):
        resolvers, found = _on_node(spec, configuration, secrets)
    else:
        resolvers, found = [str(r) for r in spec.resolvers], []
    radius: dict[str, Any] = {
        "target": where.where,
        **spec.as_dict(),
        "resolvers": resolvers,
        "resolvers_from": "arguments" if spec.resolvers else "resolv.conf",
        "table": f"{_dnserr_rules.FAMILY} {_dnserr_rules.TABLE_PREFIX}<the ledger entry id>",
        "protocols": ["udp", "tcp"],
    }
    if where.kind in LOCAL_KINDS:
        radius["netns"] = netns_path(where) or "this host's namespace"
        radius["netns_key"] = namespace_key(where)
    else:
        radius["proxy"] = f"the node's python3, files in {_dnserr_remote.RUN_DIR}/<entry id>.*"
    names = ", ".join(spec.patterns)
    toward = ", ".join(resolvers) or "(no resolver known)"
    return plan_result(
        action="inject_dns_errors",
        targets=[where.where],
        would=f"answer {spec.percent}% of the DNS queries for {names} from {where.where}"
        f" to {toward} port {spec.port} with {spec.error} for {spec.duration:g} s;"
        " forward every other query unchanged",
        preflight=[*checks, *found],
        blast_radius=radius,
    )
