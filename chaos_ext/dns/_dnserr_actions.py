"""The bodies of ``inject_dns_errors`` and its undo (the activities live in ``actions``).

Apply, in order: read the target's resolvers (if not given), refuse a second
injection in the same namespace, record the ledger entry (table, mark,
conntrack zone, namespace key, token = the entry id) and the deadline,
start the proxy inside the namespace (it binds its ports), record its ports,
load our nftables table (:mod:`chaos_ext.dns._dnserr`), read it back. Undo,
in order: delete the table, forget the conntrack entries NATed to the
proxy's ports, stop the proxy. Each step of the undo is idempotent and
works from the ledger entry alone.

Where each step runs is the target's side: this machine's (libnftables in
the namespace, the proxy a local helper) or a node's over SSH
(:mod:`chaos_ext.dns._dnserr_remote`: the node's ``nft``, ``conntrack`` and
``python3``; a pod's namespace entered with ``nsenter``). The steps and their
order are the same.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
from collections.abc import Iterator, Mapping
from typing import Any

from chaos_ext._core import helper as _helper
from chaos_ext._core import procfs as _procfs
from chaos_ext._core.contract import LEDGER_ID, Configuration, Secrets
from chaos_ext._core.failpoint import failpoint
from chaos_ext._core.ledger import (
    Entry,
    default_ledger,
    fault,
    new_entry_id,
    set_deadline,
    undo_after,
)
from chaos_ext._core.targets import identity, netns
from chaos_ext._core.targets.identity import NETNS_KEY, entries_on, namespace_key
from chaos_ext._core.targets.remote import reopen_remote
from chaos_ext._core.targets.spec import LOCAL_KINDS, Target, netns_path, parse_target
from chaos_ext.dns import _dnserr, _dnserr_remote, _dnserr_rules, _dnserr_system, _nft
from chaos_ext.dns.errors import DnsError
from chaos_ext.errors import ChaosExtError, PreflightFailed, TargetGone

__all__ = [
    "KIND",
    "apply_dns_errors",
    "check_inject",
    "check_remove",
    "open_entries",
    "resolvers_of",
    "undo_dns_errors",
]

KIND = _dnserr.KIND
#: The module an entry names (its undo handler is registered on import): the public one.
ACTIONS_MODULE = "chaos_ext.dns.actions"
PROXY_MODULE = "chaos_ext.dns._dnserr_proxy"
#: The proxy's own cap beyond the fault's duration: the undo at the deadline comes first.
CAP_GRACE = 15.0
_READY_TIMEOUT = 20.0


def resolvers_of(spec: _dnserr.ErrorSpec, side: Any = None) -> tuple[_dnserr.Address, ...]:
    """The resolvers to intercept: as given, else the target's resolv.conf nameservers."""
    if spec.resolvers:
        return spec.resolvers
    found = side.resolvers() if side is not None else _dnserr_system.read_resolvers(spec.target)
    if not found:
        paths = " or ".join(_dnserr.resolv_conf_paths(spec.target))
        raise DnsError(
            f"no nameserver found for {spec.target.where} in {paths}: give the resolvers"
            " its lookups go to (resolvers=[...])"
        )
    return found


def _in_namespace(target: Target, func: Any) -> Any:
    path = netns_path(target)
    if path is not None and not os.path.exists(path):
        raise TargetGone(f"target {target.where} does not exist ({path} is missing)")
    return netns.run_in_netns(path, func, timeout=30)


class _LocalSide:
    """A target on this machine: libnftables in its namespace, the proxy as a local helper."""

    def __init__(self, target: Target) -> None:
        self.target, self.where = target, target.where
        self.runner = _nft.LocalNft(target)
        self.identity = None
        self.recipe: dict[str, Any] = {NETNS_KEY: namespace_key(target)}

    def netns(self) -> str:
        return netns_path(self.target) or ""

    def resolvers(self) -> tuple[_dnserr.Address, ...]:
        return _dnserr_system.read_resolvers(self.target)

    def preflight(self) -> None:
        if not _procfs.has_capability(_procfs.CAP_NET_ADMIN):
            raise PreflightFailed(f"no CAP_NET_ADMIN for {self.where}: run gameday as root")

    def start_proxy(self, payload: Mapping[str, Any], token: str) -> tuple[dict[str, int], int]:
        try:
            handle = _helper.start_helper(
                module=PROXY_MODULE,
                payload=dict(payload),
                token=token,
                ready_timeout=_READY_TIMEOUT,
            )
        except ChaosExtError as exc:
            raise DnsError(f"cannot start the DNS error proxy in {self.where}: {exc}") from exc
        return dict(handle.ready["ports"]), handle.pid


@contextlib.contextmanager
def _side(target: Target, configuration: Configuration, secrets: Secrets) -> Iterator[Any]:
    if target.kind in LOCAL_KINDS:
        yield _LocalSide(target)
        return
    with _dnserr_remote.node_side(target, configuration, secrets) as side:
        yield side


def _refuse_a_second(side: Any) -> None:
    present = _dnserr_system.list_tables(side.runner)
    if present:
        raise DnsError(
            f"{side.where} already has DNS errors injected ({', '.join(present)}):"
            " remove them first (remove_dns_errors)"
        )


def _payload(
    spec: _dnserr.ErrorSpec, netns_file: str, resolvers: list[str], table: str, mark: int
) -> dict[str, Any]:
    return {
        "netns": netns_file,
        "regex": _dnserr.name_regex(spec.patterns),
        "error": spec.error,
        "percent": spec.percent,
        "port": spec.port,
        "mark": mark,
        "resolvers": resolvers,
        "table": table,
        "cap_seconds": spec.duration + CAP_GRACE,
    }


def apply_dns_errors(
    spec: _dnserr.ErrorSpec, configuration: Configuration = None, secrets: Secrets = None
) -> dict[str, Any]:
    """Inject the errors ``spec`` describes (see the module docstring); the action's result."""
    with _side(spec.target, configuration, secrets) as side:
        return _apply(spec, side)


def _apply(spec: _dnserr.ErrorSpec, side: Any) -> dict[str, Any]:
    where = spec.target
    resolvers = [str(r) for r in resolvers_of(spec, side)]
    side.preflight()
    _refuse_a_second(side)
    token = new_entry_id()  # the entry's id, the proxy's token and the table's name
    table = _dnserr_rules.table_name(token)
    mark = 0x67640000 | random.randrange(1, 0x10000)  # noqa: S311 - a label, not a secret
    zone = random.randrange(0x6000, 0x7000)  # noqa: S311 - our conntrack zone for matching UDP
    recipe: dict[str, Any] = {
        "target": where.where,
        "table": table,
        "token": token,
        "mark": mark,
        "zone": zone,
        "ports": [],
        "spec": {**spec.as_dict(), "resolvers": resolvers},
        **side.recipe,
    }
    with fault(
        kind=KIND,
        target=where.where,
        recipe=recipe,
        module=ACTIONS_MODULE,
        entry_id=token,
        identity=side.identity,
    ) as entry:
        # the deadline first: a runner killed from here on leaves its watchdog a deadline
        set_deadline(entry, spec.duration)
        payload = _payload(spec, side.netns(), resolvers, table, mark)
        ports, pid = side.start_proxy(payload, entry.id)
        recipe = {**recipe, "ports": sorted(ports.values()), "pid": pid}
        default_ledger().update_recipe(entry.id, recipe)
        routes = [(ipaddress.ip_address(r), ports[r]) for r in resolvers]
        side.runner.run(_dnserr_rules.ruleset(table, routes, spec, mark, zone))
        failpoint(f"{KIND}.mid-apply")  # loaded, not yet read back
        if table not in _dnserr_system.list_tables(side.runner):
            raise DnsError(f"{side.where}: table {table} is not there after loading it")
    undo_after(entry, spec.duration)
    return {
        "target": where.where,
        "table": f"{_dnserr_rules.FAMILY} {table}",
        LEDGER_ID: entry.id,
        **spec.as_dict(),
        "resolvers": resolvers,
        "proxy_pid": pid,
        "proxy_ports": ports,
        "conntrack_zone": zone,
    }


def undo_dns_errors(entry: Entry) -> str:
    """Delete the table, forget the redirected flows, stop the proxy; idempotent."""
    recipe: Mapping[str, Any] = entry.recipe
    if "ssh" in (recipe.get("connection") or {}):
        return _undo_on_node(entry)
    target = parse_target(recipe["target"])
    notes: list[str] = []
    try:
        reached = identity.reach(target, recipe.get(NETNS_KEY))
        deleted = _dnserr_system.delete_table(_nft.LocalNft(reached), recipe["table"])
        notes.append(f"table {recipe['table']} " + ("deleted" if deleted else "already gone"))
        failpoint(f"{KIND}.mid-undo")  # the table deleted, the flows and proxy not yet
        ports, dport = list(recipe.get("ports") or []), int(recipe["spec"]["port"])
        flows = _in_namespace(reached, lambda: _dnserr_system.forget_redirected(ports, dport))
        notes.append(f"{flows} redirected flow(s) forgotten")
    except TargetGone as exc:
        notes.append(f"target gone, and the redirect with it ({exc})")
    stopped = _helper.stop_helpers(str(recipe.get("token") or entry.id))
    notes.append("proxy stopped" if stopped else "no proxy left running")
    return f"{entry.target}: " + "; ".join(notes)


def _undo_on_node(entry: Entry) -> str:
    """The same three steps on the node, over SSH, from the ledger's connection alone."""
    recipe: Mapping[str, Any] = entry.recipe
    connection = recipe["connection"]
    notes: list[str] = []
    with reopen_remote(parse_target(recipe["target"]), connection) as shell:
        pid = connection.get("pid")
        if pid and shell.session.run(["test", "-e", f"/proc/{int(pid)}/ns/net"]).exit_code:
            notes.append(f"pod process {pid} gone, and the redirect with its namespace")
        else:
            deleted = _dnserr_system.delete_table(_nft.RemoteNft(shell), recipe["table"])
            notes.append(f"table {recipe['table']} " + ("deleted" if deleted else "already gone"))
            failpoint(f"{KIND}.mid-undo")  # the table deleted, the flows and proxy not yet
            flows = _dnserr_remote.forget_flows(shell, list(recipe.get("ports") or []))
            notes.append(
                f"{flows} redirected flow(s) forgotten"
                if flows is not None
                else f"no conntrack on the node: the flows of zone {recipe.get('zone')} expire"
                " by themselves (nothing enters the zone once the table is gone)"
            )
        stopped = _dnserr_remote.stop_proxy(shell, str(recipe.get("token") or entry.id))
    notes.append("proxy stopped" if stopped else "no proxy left running")
    return f"{entry.target}: " + "; ".join(notes)


def check_inject(arguments: Mapping[str, Any]) -> _dnserr.ErrorSpec:
    """The argument check of inject_dns_errors (defaults filled in by the parser)."""
    return _dnserr.check_error_arguments(arguments)


def check_remove(arguments: Mapping[str, Any]) -> None:
    """The argument check of remove_dns_errors: the target, if one is given."""
    if arguments.get("target"):
        parse_target(arguments["target"])


def open_entries(target: str) -> list[Entry]:
    """The open entries of this kind in the default ledger (on ``target``'s namespace if given)."""
    recorded = [e for e in default_ledger().open_entries() if e.kind == KIND]
    return entries_on(recorded, parse_target(target)) if target else recorded
