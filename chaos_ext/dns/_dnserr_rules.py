"""Our nftables table for DNS error injection: the batch, the kernel prefilter, reading it back.

:func:`chaos_ext.dns.actions.inject_dns_errors` starts a proxy
(:mod:`chaos_ext.dns._dnserr_proxy`) inside the target's network namespace,
one loopback port per resolver (UDP and TCP on the same number), then loads
one table (family ``inet``, named ``gameday_dnserr_<entry id>``) in one
transaction::

    table inet gameday_dnserr_<id> {
        chain dns_zone {            # before conntrack: which UDP queries may match
            type filter hook output priority raw; policy accept;
            meta mark <proxy mark> return                    # the proxy's own forwarding
            ip daddr { resolvers } udp dport 53 @th,160,32 & <mask> == <name bytes> ...
                ct zone set <zone>                           # one rule per pattern
            ip saddr 127.0.0.1 udp sport { proxy ports } ct zone set <zone>   # its answers
        }
        chain dns_redirect {
            type nat hook output priority dstnat; policy accept;
            meta mark <proxy mark> return
            ip daddr <resolver> tcp dport 53 redirect to :<port>              # all of TCP
            ct zone <zone> ip daddr <resolver> udp dport 53 redirect to :<port>
        }
    }

UDP: only a query whose question bytes may match a pattern (the name's wire
form compared in the kernel, letters case-folded, ``?`` and the length of a
label cut by ``*`` masked out: a superset, the proxy matches exactly) is put
in our conntrack zone and redirected; every other query goes to its resolver
untouched, at the kernel's speed. The zone keeps the two apart even on one
socket: a flow's NAT is decided by its first packet, and a client that sent
``b.test`` first from a port still gets its ``a.test`` redirected from the
same port (the two live in different zones). Deleting the table ends the
redirect at once: nothing puts a packet in the zone any more.

TCP: a connection's first packet carries no question, so every new TCP
connection to a resolver goes through the proxy (connections open before
the fault are not touched). UDP has no ``SO_ORIGINAL_DST``: the port a query
arrives on tells the proxy which resolver it was sent to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chaos_ext.dns import _nft_json
from chaos_ext.dns._dnserr import Address, ErrorSpec

__all__ = [
    "FAMILY",
    "TABLE_PREFIX",
    "delete_document",
    "is_our_table",
    "our_tables",
    "prefilter",
    "redirects_of",
    "ruleset",
    "table_name",
]

FAMILY = _nft_json.FAMILY
TABLE_PREFIX = "gameday_dnserr_"
_TABLES = _nft_json.OurTables(TABLE_PREFIX)
CHAIN = "dns_redirect"
ZONE_CHAIN = "dns_zone"
#: nftables' priorities: ``raw`` (-300, before conntrack) and ``dstnat`` (-100).
RAW = -300
DSTNAT = -100
#: Where a UDP query's name starts, in bits from the transport header (UDP 8 + DNS 12 bytes).
QNAME_BITS = (8 + 12) * 8
_CHUNK = 4  # bytes per compared word: JSON integers stay far below 2**63
#: Our table's name for a fault token: the ledger entry id, which is also the proxy's
#: helper token (so a table found without its entry still names its proxy).
table_name = _TABLES.name
is_our_table = _TABLES.ours
#: Our tables in a ``list tables`` answer (other tables are never looked at).
our_tables = _TABLES.in_listing
#: Delete exactly our table (its chains and rules with it).
delete_document = _TABLES.delete_document
_match = _nft_json.match


def _wire(pattern: str) -> tuple[bytes, bytes]:
    """(mask, value) over the wire form of the names ``pattern`` matches, from the first
    length byte on; letters case-folded, ``?`` and a label cut by ``*`` masked out."""
    star = pattern.endswith("*")
    labels = (pattern[:-1] if star else pattern).split(".")
    mask, value = bytearray(), bytearray()
    for index, label in enumerate(labels):
        cut = star and index == len(labels) - 1
        if cut and not label:
            break  # "a.*": a next label, of any length
        mask.append(0 if cut else 0xFF)
        value.append(0 if cut else len(label))
        for char in label:
            if char == "?":
                mask.append(0)
                value.append(0)
            elif char.isalpha():
                mask.append(0xDF)
                value.append(ord(char.upper()))
            else:
                mask.append(0xFF)
                value.append(ord(char))
    if not star:
        mask.append(0xFF)  # the root label: the name ends here
        value.append(0)
    return bytes(mask), bytes(value)


def prefilter(pattern: str) -> list[dict[str, Any]]:
    """The match expressions every UDP query for a name ``pattern`` matches satisfies
    (a superset: the proxy decides exactly); empty for ``*`` (every query)."""
    mask, value = _wire(pattern)
    found = []
    for start in range(0, len(mask), _CHUNK):
        word_mask, word = mask[start : start + _CHUNK], value[start : start + _CHUNK]
        if not any(word_mask):
            continue
        bits = 8 * len(word_mask)
        left: dict[str, Any] = {
            "payload": {"base": "th", "offset": QNAME_BITS + 8 * start, "len": bits}
        }
        if any(b != 0xFF for b in word_mask):
            left = {"&": [left, int.from_bytes(word_mask, "big")]}
        found.append(_match(left, int.from_bytes(word, "big")))
    return found


def _family(version: int) -> tuple[str, str]:
    return ("ip", "127.0.0.1") if version == 4 else ("ip6", "::1")


def _zone_rules(
    where: dict[str, str], routes: Sequence[tuple[Address, int]], spec: ErrorSpec, zone: int
) -> list[dict[str, Any]]:
    rules = []
    for version in (4, 6):
        addresses = [str(r) for r, _ in routes if r.version == version]
        ports = [port for r, port in routes if r.version == version]
        if not addresses:
            continue
        protocol, loopback = _family(version)
        head = [
            _match({"payload": {"protocol": protocol, "field": "daddr"}}, {"set": addresses}),
            _match({"payload": {"protocol": "udp", "field": "dport"}}, spec.port),
        ]
        tail = [{"mangle": {"key": {"ct": {"key": "zone"}}, "value": zone}}]
        for pattern in spec.patterns:
            rules.append([*head, *prefilter(pattern), *tail])
        rules.append(
            [
                _match({"payload": {"protocol": protocol, "field": "saddr"}}, loopback),
                _match({"payload": {"protocol": "udp", "field": "sport"}}, {"set": ports}),
                *tail,
            ]
        )
    return [{"add": {"rule": {**where, "chain": ZONE_CHAIN, "expr": r}}} for r in rules]


def _redirect_rules(
    where: dict[str, str], resolver: Address, port: int, dport: int, zone: int
) -> list[dict[str, Any]]:
    protocol, _ = _family(resolver.version)
    daddr = _match({"payload": {"protocol": protocol, "field": "daddr"}}, str(resolver))
    to = [{"counter": None}, {"redirect": {"port": port}}]
    tcp = [daddr, _match({"payload": {"protocol": "tcp", "field": "dport"}}, dport), *to]
    udp = [
        _match({"ct": {"key": "zone"}}, zone),
        daddr,
        _match({"payload": {"protocol": "udp", "field": "dport"}}, dport),
        *to,
    ]
    return [{"add": {"rule": {**where, "chain": CHAIN, "expr": e}}} for e in (tcp, udp)]


def _chain(where: dict[str, str], name: str, kind: str, prio: int) -> dict[str, Any]:
    chain = {**where, "name": name, "type": kind, "hook": "output", "prio": prio}
    return {"add": {"chain": {**chain, "policy": "accept"}}}


def ruleset(
    table: str, routes: Sequence[tuple[Address, int]], spec: ErrorSpec, mark: int, zone: int
) -> dict[str, Any]:
    """The batch that creates our table: ``routes`` maps each resolver to its proxy port;
    packets carrying ``mark`` (the proxy's own upstream sockets) are left alone."""
    where = {"family": FAMILY, "table": table}
    own = [_match({"meta": {"key": "mark"}}, mark), {"return": None}]
    return {
        "nftables": [
            {"add": {"table": {"family": FAMILY, "name": table}}},
            _chain(where, ZONE_CHAIN, "filter", RAW),
            _chain(where, CHAIN, "nat", DSTNAT),
            {"add": {"rule": {**where, "chain": ZONE_CHAIN, "expr": own}}},
            *_zone_rules(where, routes, spec, zone),
            {"add": {"rule": {**where, "chain": CHAIN, "expr": own}}},
            *(
                rule
                for resolver, port in routes
                for rule in _redirect_rules(where, resolver, port, spec.port, zone)
            ),
        ]
    }


def redirects_of(listing: Mapping[str, Any] | None, table: str) -> tuple[int, list[int]]:
    """(the DNS port redirected, the proxy ports) read back from ``list table``'s answer."""
    dport, ports = 0, set()
    for item in _nft_json.items(listing):
        rule = item.get("rule")
        if not rule or rule.get("table") != table:
            continue
        for expr in rule.get("expr", []):
            match = expr.get("match", {})
            field = match.get("left", {}).get("payload", {}).get("field")
            if field == "dport" and isinstance(match.get("right"), int):
                dport = int(match["right"])
            if "redirect" in expr:
                ports.add(int(expr["redirect"]["port"]))
    return dport, sorted(ports)
