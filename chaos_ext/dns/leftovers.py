"""Our DNS rate-limit and DNS error tables wherever they are: the system side of
``gameday ledger --scan``.

Every network namespace on the machine (by inode, named or not,
:func:`chaos_ext._core.targets.identity.namespaces`) is asked once for its
tables through libnftables; only tables named ``gameday_dnsrate_*`` (a
``dns-rate-limit``) and ``gameday_dnserr_*`` (the redirect of
``inject_dns_errors``) are kept. Table names are drawn at random per fault, so
a name is the table's identity: an open entry naming it owns it. A DNS error
table's name carries its entry id, which is also its proxy's helper token
(the proxy itself is found by the helper scan); its DNS port and proxy ports
are read back from its rules, so the adopted entry's undo also forgets the
redirected flows. An orphan is undone by its kind's own undo, from an entry
that names the namespace by its inode. Listing reads nothing else and
changes nothing.
"""

from __future__ import annotations

from chaos_ext._core import procfs as _procfs
from chaos_ext._core.ledger import Adoption, Entry, Leftover
from chaos_ext._core.targets.identity import NETNS_KEY, namespaces
from chaos_ext._core.targets.spec import Target
from chaos_ext.dns import _dnserr, _dnserr_rules, _nft, _ratelimit
from chaos_ext.errors import ChaosExtError

__all__ = ["find_tables"]

RATE_KIND = "dns-rate-limit"
_MODULE = "chaos_ext.dns.actions"


def _leftover(key: str, where: Target, table: str) -> Leftover:
    def refers(entry: Entry) -> bool:
        return entry.kind == RATE_KIND and entry.recipe.get("table") == table

    recipe = {"target": where.where, "table": table, "connection": {}, NETNS_KEY: key}
    return Leftover(
        ref=f"nft:{key.rsplit(':', 1)[-1]}:{table}",
        kind=RATE_KIND,
        what=f"nft table inet {table} in {where.where} (netns inode {key.rsplit(':', 1)[-1]})",
        adoption=Adoption(kind=RATE_KIND, module=_MODULE, target=where.where, recipe=recipe),
        refers=refers,
    )


def find_tables() -> tuple[list[Leftover], list[str]]:
    """Our tables in every network namespace, rate limits (``gameday_dnsrate_*``) and DNS
    errors (``gameday_dnserr_*``) alike, one listing each; what could not be looked at."""
    found: list[Leftover] = []
    problems: list[str] = []
    if not _procfs.has_capability(_procfs.CAP_NET_ADMIN):  # libnftables would print EPERM
        return [], ["nft tables: not looked at: listing them needs CAP_NET_ADMIN (root)"]
    for key, where in namespaces():
        runner = _nft.LocalNft(where)
        try:
            listing = runner.run({"nftables": [{"list": {"tables": {}}}]})
            found += [_leftover(key, where, t) for t in _ratelimit.our_tables(listing)]
            errors = _dnserr_rules.our_tables(listing)
            found += [_error_leftover(key, where, t, runner) for t in errors]
        except (ChaosExtError, OSError) as exc:
            gone = where.kind == "pid" and not _procfs.exists(where.pid)
            if not gone:  # a process that ended meanwhile took nothing of ours with it
                problems.append(f"nft tables in {where.where}: {exc}")
    return found, problems


def _error_leftover(key: str, where: Target, table: str, runner: _nft.NftRunner) -> Leftover:
    def refers(entry: Entry) -> bool:
        return entry.kind == _dnserr.KIND and entry.recipe.get("table") == table

    listing = runner.run({"nftables": [{"list": {"table": {"family": "inet", "name": table}}}]})
    dport, ports = _dnserr_rules.redirects_of(listing, table)
    recipe = {
        "target": where.where,
        "table": table,
        "token": table.removeprefix(_dnserr_rules.TABLE_PREFIX),
        "ports": ports,
        "spec": {"port": dport or 53},
        NETNS_KEY: key,
    }
    inode = key.rsplit(":", 1)[-1]
    return Leftover(
        ref=f"nft:{inode}:{table}",
        kind=_dnserr.KIND,
        what=f"nft table inet {table} in {where.where} (netns inode {inode}, DNS errors"
        f" redirected to ports {ports})",
        adoption=Adoption(kind=_dnserr.KIND, module=_MODULE, target=where.where, recipe=recipe),
        refers=refers,
    )
