"""The system side of DNS error injection: our table, conntrack entries, resolv.conf.

Everything here acts in the network namespace of the calling thread (the
action runs it through :func:`chaos_ext._core.targets.netns.run_in_netns`;
the proxy runs it in its own, having entered the target's namespace).

Conntrack: a flow NATed to the proxy keeps pointing at the proxy's port as
long as its conntrack entry lives (120 s for a UDP flow that saw replies).
Our UDP redirects live in a conntrack zone of their own that nothing
reaches once the table is gone, but :func:`forget_redirected` still deletes
exactly the entries (any zone, UDP and TCP) whose reply comes from one of
the proxy's ports, so nothing of the fault is left in the table. No flush
is needed at apply time: a client's long-lived UDP socket whose flow is
already tracked (zone 0) gets its matching queries tracked in our zone,
redirected from its next query on. TCP connections already open are left
alone (re-routing them mid-stream would break them): the fault applies to
TCP connections opened after it.
"""

from __future__ import annotations

import contextlib
import functools
import socket
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from chaos_ext._core.targets.spec import Target
from chaos_ext.dns import _dnserr, _dnserr_rules, _nft
from chaos_ext.dns.errors import DnsError

__all__ = [
    "cleanup_here",
    "delete_table",
    "forget_redirected",
    "list_tables",
    "read_resolvers",
]

_DST_NAT = 1 << 5  # IPS_DST_NAT
_ABSENT = "No such file or directory"
_HERE = Target("local")  # "local" acts in the calling thread's namespace


def list_tables(runner: _nft.NftRunner) -> list[str]:
    """Our tables (``gameday_dnserr_*``) on the runner's target; nothing else is read."""
    return _dnserr_rules.our_tables(runner.run({"nftables": [{"list": {"tables": {}}}]}))


def delete_table(runner: _nft.NftRunner, table: str) -> bool:
    """Delete exactly ``table``; False if it was already gone. Checked afterwards."""
    try:
        runner.run(_dnserr_rules.delete_document(table))
    except _nft.NftError as exc:
        if _ABSENT not in str(exc):
            raise
        return False
    if table in list_tables(runner):
        raise DnsError(f"{runner.where}: table {table} is still there after its deletion")
    return True


def _entries() -> Iterable[tuple[Any, Callable[[Any], object]]]:
    """Every conntrack entry of this namespace (IPv4 and IPv6), with its deletion."""
    from pyroute2 import Conntrack  # noqa: PLC0415 - netlink on demand
    from pyroute2.netlink.nfnetlink.nfctsocket import NFCTAttrTuple  # noqa: PLC0415

    ct = Conntrack()
    try:
        for family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                for entry in list(ct.dump_entries(tuple_orig=NFCTAttrTuple(family=family))):
                    yield entry, functools.partial(_delete, ct)
    finally:
        ct.close()


def _delete(ct: Any, entry: Any) -> object:
    if entry.zone:  # an entry of a zone is found in that zone only
        return ct.entry("del", tuple_orig=entry.tuple_orig, zone=entry.zone)
    return ct.delete(entry)


def _forget(keep: Callable[[Any], bool]) -> int:
    deleted = 0
    for entry, delete in _entries():
        if keep(entry):
            continue
        with contextlib.suppress(OSError):  # gone meanwhile is fine
            delete(entry)
            deleted += 1
    return deleted


def forget_redirected(ports: Sequence[int], dport: int) -> int:
    """Delete the conntrack entries NATed to one of ``ports`` (queries to ``dport``)."""
    wanted = set(ports)

    def keep(entry: Any) -> bool:
        orig, reply = entry.tuple_orig, entry.tuple_reply
        return not (orig.dport == dport and reply.sport in wanted and entry.status & _DST_NAT)

    return _forget(keep) if wanted else 0


def cleanup_here(payload: dict[str, Any], ports: list[int]) -> None:
    """The proxy's last act in its namespace: delete its table, forget its flows."""
    with contextlib.suppress(DnsError, OSError):
        delete_table(_nft.LocalNft(_HERE), str(payload["table"]))
    with contextlib.suppress(OSError, ImportError):
        forget_redirected(ports, int(payload["port"]))


def read_resolvers(target: Target) -> tuple[_dnserr.Address, ...]:
    """The nameservers of the target's resolv.conf (the first file that exists)."""
    for path in _dnserr.resolv_conf_paths(target):
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                return _dnserr.parse_resolv_conf(handle.read())
        except OSError:
            continue
    return ()
