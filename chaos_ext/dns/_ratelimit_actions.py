"""The bodies of ``limit_dns_rate`` and its undo (the activities live in ``actions``).

Apply, in order: connect (libnftables here, the node's ``nft`` over SSH),
the preflight (CAP_NET_ADMIN, the kernel's nf_tables and limit), refuse a
second limit on the target, record the ledger entry (table, spec,
connection, namespace key), load the table (:mod:`chaos_ext.dns._ratelimit`)
and read its limit back. Undo: reconnect from the entry alone and delete
exactly that table.
"""

from __future__ import annotations

import uuid
from typing import Any

from chaos_ext._core.contract import LEDGER_ID, Configuration, Secrets
from chaos_ext._core.failpoint import failpoint
from chaos_ext._core.ledger import Entry, fault, undo_after
from chaos_ext._core.targets.identity import NETNS_KEY, namespace_key
from chaos_ext._core.targets.remote import identity_of
from chaos_ext._core.targets.spec import LOCAL_KINDS, parse_target
from chaos_ext.dns import _nft, _ratelimit, _sweep
from chaos_ext.dns.errors import DnsError
from chaos_ext.errors import TargetGone

__all__ = ["ACTIONS_MODULE", "RATE_KIND", "apply_rate_limit", "undo_rate_limit"]

RATE_KIND = _sweep.RATE_KIND
#: The module an entry names: the public one, where experiments find the activities.
ACTIONS_MODULE = "chaos_ext.dns.actions"


def apply_rate_limit(
    spec: _ratelimit.RateLimitSpec,
    target: str,
    duration_seconds: float,
    configuration: Configuration,
    secrets: Secrets,
) -> dict[str, Any]:
    """Load the limit ``spec`` describes on ``target``; the action's result."""
    where = parse_target(target)
    table = _ratelimit.table_name(uuid.uuid4().hex[:12])
    with _nft.runner_for(where, configuration, secrets) as (runner, connection):
        preflight = runner.preflight()
        present = _nft.list_ours(runner)
        if present:
            raise DnsError(
                f"{where.where} already has a DNS rate limit ({', '.join(present)}):"
                " remove it first (remove_dns_rate_limit)"
            )
        recipe: dict[str, Any] = {
            "target": target,
            "table": table,
            "spec": spec.as_dict(),
            "connection": connection,
        }
        if where.kind in LOCAL_KINDS:  # which namespace, whatever the spelling
            recipe[NETNS_KEY] = namespace_key(where)
        with fault(
            kind=RATE_KIND,
            target=where.where,
            recipe=recipe,
            module=ACTIONS_MODULE,
            identity=identity_of(connection),
        ) as entry:
            runner.run(_ratelimit.ruleset(spec, table))
            failpoint(f"{RATE_KIND}.mid-apply")  # loaded, not yet read back
            loaded = _nft.counters(runner, table)
    if duration_seconds:
        undo_after(entry, duration_seconds)
    return {
        "target": where.where,
        "table": f"{_ratelimit.FAMILY} {table}",
        LEDGER_ID: entry.id,
        **spec.as_dict(),
        "duration_seconds": duration_seconds,
        "kernel": preflight["kernel"],
        "via": preflight["via"],
        "loaded_pps": loaded["pps"],
        "loaded_burst": loaded["burst"],
    }


def undo_rate_limit(entry: Entry) -> str:
    """Delete exactly the entry's table, reconnecting from the entry alone; idempotent."""
    recipe = entry.recipe
    where = parse_target(recipe["target"])
    try:
        connection, key = recipe.get("connection", {}), recipe.get(NETNS_KEY)
        with _nft.runner_from_recipe(where, connection, key) as runner:
            failpoint(f"{RATE_KIND}.mid-undo")  # reconnected, the table not yet deleted
            deleted = _nft.delete_table(runner, recipe["table"])
    except TargetGone as exc:
        return f"{entry.target}: target gone, and the limit with it ({exc})"
    if not deleted:
        return f"{entry.target}: table {recipe['table']} already gone"
    return f"{entry.target}: table {_ratelimit.FAMILY} {recipe['table']} deleted"
