"""The DNS error proxy's wire work: read a query's question, build an error answer, decide.

Standard library only, like the proxy's loop (:mod:`chaos_ext.dns._dnserr_proxy`):
the question is read from the wire by hand (labels, no compression pointers
in a question), an answer is the query's header and question with QR and RA
set, the error's RCODE and no records; ``random-ip`` adds one A or AAAA
record with a random unicast address.
"""

from __future__ import annotations

import random
import re

__all__ = ["DROP", "PASS", "Decider", "error_answer", "question_of"]

PASS = b"pass"  # sentinel: forward to the resolver
DROP = b""  # sentinel: answer nothing (timeout)
_RCODES = {"nxdomain": 3, "servfail": 2, "refused": 5, "timeout": -1, "random-ip": 0}


def question_of(wire: bytes) -> tuple[str, int, int] | None:
    """(lower-case name without the trailing dot, qtype, end of the question) of a standard
    query with one question; None for anything else (it is forwarded untouched)."""
    if len(wire) < 17 or wire[2] & 0xF8 or wire[4:6] != b"\x00\x01":  # QR=0, OPCODE=0, QD=1
        return None
    labels: list[bytes] = []
    at = 12
    while True:
        if at >= len(wire):
            return None
        size = wire[at]
        if size == 0:
            at += 1
            break
        if size > 63 or at + 1 + size > len(wire):
            return None  # a pointer or a truncated label: not a plain question
        labels.append(wire[at + 1 : at + 1 + size])
        at += 1 + size
    if at + 4 > len(wire):
        return None
    name = b".".join(labels).decode("ascii", "replace").lower()
    return name, int.from_bytes(wire[at : at + 2], "big"), at + 4


def _random_rdata(qtype: int, rng: random.Random) -> bytes | None:
    if qtype == 1:  # A: a unicast address outside 0/8, 127/8 and the multicast ranges
        return bytes([rng.choice([*range(1, 127), *range(128, 224)])]) + rng.randbytes(3)
    if qtype == 28:  # AAAA: global unicast 2000::/3
        return bytes([0x20 | rng.randrange(0x20)]) + rng.randbytes(15)
    return None


def error_answer(wire: bytes, end: int, qtype: int, error: str, rng: random.Random) -> bytes:
    """The answer to a query (its header and question, up to ``end``) carrying ``error``;
    ``DROP`` for ``timeout``."""
    rcode = _RCODES[error]
    if rcode < 0:
        return DROP
    flags = bytes([0x80 | (wire[2] & 0x79), 0x80 | rcode])  # QR, opcode, RD kept; RA; rcode
    rdata = _random_rdata(qtype, rng) if error == "random-ip" else None
    counts = b"\x00\x01" + (b"\x00\x01" if rdata else b"\x00\x00") + b"\x00\x00\x00\x00"
    head = wire[:2] + flags + counts + wire[12:end]
    if rdata is None:
        return head
    record = b"\xc0\x0c" + qtype.to_bytes(2, "big") + b"\x00\x01" + (30).to_bytes(4, "big")
    return head + record + len(rdata).to_bytes(2, "big") + rdata


class Decider:
    """What to do with one query: ``PASS``, ``DROP`` or the error answer's bytes."""

    def __init__(self, regex: str, error: str, percent: int, seed: int | None = None) -> None:
        self.match = re.compile(regex).fullmatch
        self.error, self.percent = error, percent
        self.rng = random.Random(seed)  # noqa: S311 - fault sampling, not cryptography
        self.matched = self.injected = 0

    def __call__(self, wire: bytes) -> tuple[bytes, int]:
        """(verdict, end of the question: 0 if it could not be read)."""
        question = question_of(wire)
        if question is None:
            return PASS, 0
        if not self.match(question[0]):
            return PASS, question[2]
        self.matched += 1
        if self.percent < 100 and self.rng.random() * 100 >= self.percent:
            return PASS, question[2]
        self.injected += 1
        return error_answer(wire, question[2], question[1], self.error, self.rng), question[2]
