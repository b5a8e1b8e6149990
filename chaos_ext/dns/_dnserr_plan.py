"""The plan of inject_dns_errors: which names, which error, which resolvers, which namespace.

Touches nothing: it checks the arguments as the action does, reads the
target's resolv.conf when no resolvers are given (as the action would), and
lists the target's tables of ours (a second injection is refused). No
ledger entry, no proxy, no table.
"""

from __future__ import annotations

import os
from typing import Any

from chaos_ext._core.contract import Configuration, Secrets, plan_result, preflight_check
from chaos_ext._core.targets.access import target_checks
from chaos_ext._core.targets.identity import namespace_key
from chaos_ext._core.targets.spec import netns_path
from chaos_ext.dns import _dnserr, _dnserr_rules, _dnserr_system, _nft
from chaos_ext.errors import ChaosExtError

__all__ = ["plan_of"]


def _checks(spec: _dnserr.ErrorSpec, resolvers: list[str]) -> list[dict[str, Any]]:
    where = spec.target
    found = preflight_check(
        "resolvers known",
        bool(resolvers),
        ", ".join(resolvers)
        or f"none in {' or '.join(_dnserr.resolv_conf_paths(where))}: give resolvers=[...]",
    )
    path = netns_path(where)
    if path is not None and not os.path.exists(path):
        return [found, preflight_check("target exists", False, f"{path} is missing")]
    try:
        present = _dnserr_system.list_tables(_nft.LocalNft(where))
    except ChaosExtError as exc:
        return [found, preflight_check("nftables", False, str(exc))]
    detail = f"already injected ({', '.join(present)}): remove it first" if present else "none"
    return [found, preflight_check("no DNS errors injected there yet", not present, detail)]


def plan_of(
    spec: _dnserr.ErrorSpec, configuration: Configuration = None, secrets: Secrets = None
) -> dict[str, Any]:
    """What ``inject_dns_errors`` would do with ``spec`` (its arguments, parsed by the
    action's own check); does nothing."""
    where = spec.target
    given = [str(r) for r in spec.resolvers]
    resolvers = given or [str(r) for r in _dnserr_system.read_resolvers(where)]
    radius: dict[str, Any] = {
        "target": where.where,
        **spec.as_dict(),
        "resolvers": resolvers,
        "resolvers_from": "arguments" if given else "resolv.conf",
        "netns": netns_path(where) or "this host's namespace",
        "netns_key": namespace_key(where),
        "table": f"{_dnserr_rules.FAMILY} {_dnserr_rules.TABLE_PREFIX}<the ledger entry id>",
        "protocols": ["udp", "tcp"],
    }
    names = ", ".join(spec.patterns)
    toward = ", ".join(resolvers) or "(no resolver known)"
    return plan_result(
        action="inject_dns_errors",
        targets=[where.where],
        would=f"answer {spec.percent}% of the DNS queries for {names} from {where.where}"
        f" to {toward} port {spec.port} with {spec.error} for {spec.duration:g} s;"
        " forward every other query unchanged",
        preflight=[*target_checks(where, configuration, secrets), *_checks(spec, resolvers)],
        blast_radius=radius,
    )
