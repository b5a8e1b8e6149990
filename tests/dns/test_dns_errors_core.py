"""The pure core of inject_dns_errors: patterns, the kernel prefilter, the proxy's wire work.

No namespace, no process: the name patterns against Chaos Mesh's examples,
the prefilter's bytes against real queries built by dnspython (a superset of
the exact match, case-folded), and the proxy's answers parsed back by
dnspython.
"""

from __future__ import annotations

import random
import re

import dns.message
import dns.rcode
import dns.rdatatype
import pytest

from chaos_ext.dns import _dnserr, _dnserr_rules
from chaos_ext.dns._dnserr_wire import PASS, Decider, error_answer, question_of

CASES = [
    ("a.*", "a.test", True),
    ("a.*", "A.Test.", True),
    ("a.*", "a", False),
    ("a.*", "ab.test", False),
    ("github.?om", "github.com", True),
    ("github.?om", "github.xom", True),
    ("github.?om", "github.co", False),
    ("chaos-mesh.*", "chaos-mesh.org", True),
    ("chaos-mesh.*", "www.chaos-mesh.org", False),
    ("ab*", "abc.example", True),
    ("a?b", "a.b", False),  # ? is one character of a label
    ("*", "anything.at.all", True),
    ("b.test", "b.test", True),
    ("b.test", "bb.test", False),
]


def _prefilter_passes(pattern: str, wire: bytes) -> bool:
    """Evaluate the prefilter's match expressions on a UDP query, as the kernel would."""
    payload = b"\x00" * 8 + wire  # the UDP header, then the DNS message
    for expr in _dnserr_rules.prefilter(pattern):
        match = expr["match"]
        left, mask = match["left"], None
        if "&" in left:
            left, mask = left["&"]
        offset, bits = left["payload"]["offset"] // 8, left["payload"]["len"] // 8
        word = int.from_bytes(payload[offset : offset + bits].ljust(bits, b"\0"), "big")
        if (word & mask if mask is not None else word) != match["right"]:
            return False
    return True


@pytest.mark.parametrize(("pattern", "name", "matches"), CASES)
def test_patterns_match_as_chaos_mesh_and_the_prefilter_is_a_superset(
    pattern: str, name: str, matches: bool
) -> None:
    spec = _dnserr.check_error_arguments({"patterns": [pattern], "error": "nxdomain"})
    regex = _dnserr.name_regex(spec.patterns)
    assert bool(re.fullmatch(regex, name.lower().rstrip("."))) is matches
    wire = dns.message.make_query(name, "A").to_wire()
    if matches:  # every query the proxy would answer is redirected by the kernel
        assert _prefilter_passes(pattern, wire)
        assert _prefilter_passes(pattern, dns.message.make_query(name.upper(), "A").to_wire())


def test_the_prefilter_keeps_other_names_away_from_the_proxy() -> None:
    for pattern, name in (("a.*", "b.test"), ("b.test", "bb.test"), ("github.?om", "gitlab.com")):
        assert not _prefilter_passes(pattern, dns.message.make_query(name, "A").to_wire())


def test_every_bad_argument_is_named_in_one_refusal() -> None:
    with pytest.raises(_dnserr.InvalidArgument) as refused:
        _dnserr.check_error_arguments(
            {"patterns": ["a*b", ""], "error": "nodata", "percent": 0, "target": "ssh:n1:0"}
        )
    text = str(refused.value)
    for part in ("'a*b'", "''", "'nodata'", "percent: 0", "target port"):
        assert part in text, text


@pytest.mark.parametrize(
    ("error", "rcode"),
    [("nxdomain", dns.rcode.NXDOMAIN), ("servfail", dns.rcode.SERVFAIL), ("refused", 5)],
)
def test_error_answers_parse_back_with_the_query_id_and_question(error: str, rcode: int) -> None:
    query = dns.message.make_query("A.test", "A", use_edns=0)
    wire = query.to_wire()
    parsed = question_of(wire)
    assert parsed is not None and parsed[0] == "a.test"
    answer = dns.message.from_wire(
        error_answer(wire, parsed[2], parsed[1], error, random.Random(1))
    )
    assert answer.id == query.id and answer.rcode() == rcode and not answer.answer
    assert answer.question == query.question


def test_random_ip_answers_a_and_aaaa_with_one_record() -> None:
    rng = random.Random(7)
    for qtype in ("A", "AAAA"):
        wire = dns.message.make_query("a.test", qtype).to_wire()
        _, kind, end = question_of(wire)  # type: ignore[misc]
        answer = dns.message.from_wire(error_answer(wire, end, kind, "random-ip", rng))
        (rrset,) = answer.answer
        assert rrset.rdtype == dns.rdatatype.from_text(qtype) and len(rrset) == 1


def test_the_decider_passes_what_it_cannot_read_and_honours_percent() -> None:
    decide = Decider(_dnserr.name_regex(["a.test"]), "nxdomain", 30, seed=3)
    assert decide(b"\x00" * 5) == (PASS, 0)
    wire = dns.message.make_query("a.test", "A").to_wire()
    hits = sum(decide(wire)[0] is not PASS for _ in range(10_000))
    assert 2_700 < hits < 3_300, hits
