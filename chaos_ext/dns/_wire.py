"""DNS wire format: queries built once by dnspython, responses read by their header.

A flood sends tens of thousands of queries a second from Python, so the
queries are built once with dnspython (id 0) and only the two id bytes are
replaced per send; a response is classified from its 12-byte header
(RFC 1035 §4.1.1: id, RCODE, ANCOUNT) without parsing the whole message,
which would cost more than the send and receive themselves.
"""

from __future__ import annotations

import dns.exception
import dns.message
import dns.name
import dns.rdatatype

from chaos_ext.errors import InvalidArgument

__all__ = ["OUTCOMES", "classify", "query_wire", "with_id"]

#: Every outcome a query can have; the counters a flood reports.
OUTCOMES = ("answer", "nodata", "nxdomain", "servfail", "refused", "other_rcode", "timeout")

_RCODE_OUTCOME = {3: "nxdomain", 2: "servfail", 5: "refused"}


def query_wire(name: str, qtype: str = "A") -> bytes:
    """A recursive query for ``name`` in wire format, id 0, no EDNS (like a stub resolver)."""
    try:
        message = dns.message.make_query(dns.name.from_text(name), dns.rdatatype.from_text(qtype))
    except (dns.exception.DNSException, ValueError) as exc:
        raise InvalidArgument(f"cannot build a {qtype} query for {name!r}: {exc}") from exc
    message.id = 0
    return message.to_wire()


def with_id(wire: bytes, query_id: int) -> bytes:
    """``wire`` with its message id replaced."""
    return query_id.to_bytes(2, "big") + wire[2:]


def classify(response: bytes) -> tuple[int, str]:
    """``(id, outcome)`` from a response's header; outcome is one of :data:`OUTCOMES`."""
    if len(response) < 12:
        return -1, "other_rcode"
    rcode = response[3] & 0x0F
    if rcode == 0:
        answers = int.from_bytes(response[6:8], "big")
        return int.from_bytes(response[0:2], "big"), "answer" if answers else "nodata"
    return int.from_bytes(response[0:2], "big"), _RCODE_OUTCOME.get(rcode, "other_rcode")
