"""Pure helpers of the DNS domain: search-list expansion, wire headers, checks."""

from __future__ import annotations

from typing import Any

import dns.message
import dns.name
import dns.rcode
import dns.resolver
import pytest

from chaos_ext.dns._checks import check_flood, check_resolution_stats, check_saturation
from chaos_ext.dns._flood_workers import split_plan
from chaos_ext.dns._search import candidates
from chaos_ext.dns._tally import FloodPlan, FloodTally, summarize
from chaos_ext.dns._wire import classify, query_wire, with_id
from chaos_ext.errors import InvalidArgument

K8S = ["default.svc.cluster.local", "svc.cluster.local", "cluster.local"]


@pytest.mark.parametrize(
    ("name", "ndots", "expected"),
    [
        # fewer dots than ndots: every suffix first, the name itself last
        ("api.example.com", 5, [*(f"api.example.com.{d}" for d in K8S), "api.example.com"]),
        ("web", 5, [*(f"web.{d}" for d in K8S), "web"]),
        # enough dots: the name first, then the suffixes
        ("a.b.c.d.e.f", 5, ["a.b.c.d.e.f", *(f"a.b.c.d.e.f.{d}" for d in K8S)]),
        ("api.example.com", 2, ["api.example.com", *(f"api.example.com.{d}" for d in K8S)]),
        # a trailing dot is absolute: one query, the cure for ndots:5
        ("api.example.com.", 5, ["api.example.com"]),
    ],
)
def test_search_expansion_follows_glibc(name: str, ndots: int, expected: list[str]) -> None:
    assert candidates(name, K8S, ndots) == expected


def test_search_expansion_without_search_list_is_the_name() -> None:
    assert candidates("web", [], 5) == ["web"]


def test_wire_query_and_classification_round_trip() -> None:
    wire = with_id(query_wire("www.example.test", "AAAA"), 4242)
    query = dns.message.from_wire(wire)
    assert query.id == 4242 and query.question[0].rdtype == 28

    answer = dns.message.make_response(query)
    assert classify(answer.to_wire()) == (4242, "nodata")
    answer.set_rcode(dns.rcode.NXDOMAIN)
    assert classify(answer.to_wire()) == (4242, "nxdomain")
    answer.set_rcode(dns.rcode.SERVFAIL)
    assert classify(answer.to_wire()) == (4242, "servfail")
    assert classify(b"\x00\x01") == (-1, "other_rcode")


def _plan(**overrides: Any) -> FloodPlan:
    settings: dict[str, Any] = {
        "server": "127.0.0.1",
        "port": 53,
        "qps": 100.0,
        "duration": 10.0,
        "max_queries": 1000,
        "protocol": "udp",
        "timeout": 1.0,
        "concurrency": 100,
        "sockets": 1,
    }
    return FloodPlan(**{**settings, **overrides})


def test_book_paces_sends_at_the_target_rate_and_caps() -> None:
    book = FloodTally(_plan(qps=100.0, max_queries=150), [[b"q"]], start=0.0)
    assert book.due(0.0) == 1
    assert book.due(0.5) == 51
    for key in range(51):
        book.sent_query(key, *book.next_query(), now=0.5)
    assert book.due(0.5) == 0
    assert book.due(1.0) == 50
    assert book.due(5.0) == 150 - 51  # the count cap
    assert book.due(10.0) == 0  # the time cap


def test_book_walks_the_search_chain_on_nxdomain_and_stops_on_answer() -> None:
    book = FloodTally(_plan(), [[b"a.s1", b"a.s2", b"a"]], start=0.0)
    book.sent_query(1, *book.next_query(), now=0.0)
    book.answered(1, "nxdomain", 0.001)
    assert book.next_query() == (0, 1)  # the follow-up goes before a new lookup
    book.sent_query(2, 0, 1, now=0.002)
    book.answered(2, "answer", 0.003)
    assert (book.lookups, book.lookups_answered) == (1, 1)
    assert book.next_query() == (0, 0)  # a new lookup
    book.sent_query(3, 0, 0, now=0.004)
    assert book.expire(1.5) == [3]
    assert book.counts["timeout"] == 1 and book.lookups_failed == 1
    assert not book.answered(3, "answer", 1.6)  # late: already counted as a timeout
    assert book.late == 1


FLOOD = {
    "server": "127.0.0.1",
    "names": ["www.example.test"],
    "port": 53,
    "qps": 100,
    "duration_seconds": 10,
    "protocol": "udp",
    "search_domains": None,
    "ndots": 1,
    "qtype": "A",
    "timeout_seconds": 1.0,
    "concurrency": 100,
    "max_queries": 0,
    "sockets": 4,
    "workers": 1,
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"qps": 1e9}, "qps"),
        ({"qps": 0}, "qps"),
        ({"duration_seconds": 86_400}, "duration_seconds"),
        ({"qps": 100_000, "duration_seconds": 3_600}, "max_queries"),
        ({"server": "kube-dns.kube-system"}, "not an IP address"),
        ({"port": 70_000}, "port"),
        ({"protocol": "quic"}, "protocol"),
        ({"names": []}, "names"),
        ({"names": ["a" * 64 + ".example.test"]}, "cannot build"),
        ({"search_domains": ["x" * 250], "names": ["svc"]}, "cannot build"),
        ({"ndots": 99}, "ndots"),
        ({"qtype": "AXFR"}, "qtype"),
        ({"protocol": "tcp", "concurrency": 5_000}, "concurrency"),
    ],
)
def test_flood_check_refuses_absurd_values(change: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        check_flood({**FLOOD, **change})


def test_saturation_and_probe_checks() -> None:
    good = {
        "server": "10.96.0.10",
        "port": 53,
        "connections": 25,
        "hold_seconds": 60,
        "query_name": "",
        "connect_timeout_seconds": 3.0,
    }
    check_saturation(good)
    for change in (
        {"connections": 0},
        {"connections": 50_000},
        {"hold_seconds": 7_200},
        {"query_name": "bad..name"},
        {"server": "localhost"},
    ):
        with pytest.raises(InvalidArgument):
            check_saturation({**good, **change})
    probe = {
        "server": "::1",
        "port": 53,
        "name": "www.example.test",
        "protocol": "tcp",
        "samples": 20,
        "timeout_seconds": 1.0,
        "qtype": "A",
        "interval_seconds": 0.0,
    }
    check_resolution_stats(probe)
    with pytest.raises(InvalidArgument, match="fewer samples"):
        check_resolution_stats({**probe, "samples": 10_000, "timeout_seconds": 30})


def test_split_plan_divides_rate_count_and_concurrency() -> None:
    shares = split_plan(_plan(qps=1000.0, max_queries=1001, concurrency=200, sockets=8), 3)
    assert [s.max_queries for s in shares] == [334, 334, 333]
    assert all(s.qps == pytest.approx(1000 / 3) for s in shares)
    assert [(s.concurrency, s.sockets) for s in shares] == [(66, 2)] * 3
    assert split_plan(_plan(concurrency=1, sockets=1), 2)[1].concurrency == 1


def test_summarize_merges_worker_tallies() -> None:
    tallies = []
    for latency in (0.001, 0.003):
        book = FloodTally(_plan(qps=10.0), [[b"a.s1", b"a"]], start=0.0)
        book.sent_query(1, *book.next_query(), now=0.0)
        book.answered(1, "nxdomain", latency)
        book.sent_query(2, *book.next_query(), now=0.1)
        book.answered(2, "answer", 0.1 + latency)
        tallies.append(book.tally(elapsed=0.5))
    report = summarize(tallies)
    assert (report["queries_sent"], report["nxdomain"], report["answer"]) == (4, 2, 2)
    assert report["queries_per_lookup"] == 2.0 and report["workers"] == 2
    # latencies 1, 1, 3, 3 ms: type-7 percentiles, from histograms at 3 significant digits
    assert report["p50_ms"] == pytest.approx(2.0, abs=0.002)
    assert report["p99_ms"] == pytest.approx(3.0, abs=0.002)
    assert report["sent_qps"] == pytest.approx(2 * 2 / 0.2)


@pytest.mark.parametrize("name", ["web", "api.example.com", "a.b.c.d.e.f", "api.example.com."])
@pytest.mark.parametrize("ndots", [1, 2, 5])
def test_search_expansion_agrees_with_dnspythons_resolver(name: str, ndots: int) -> None:
    resolver = dns.resolver.Resolver(configure=False)
    resolver.search = [dns.name.from_text(d) for d in K8S]
    resolver.ndots = ndots
    theirs = resolver._get_qnames_to_try(dns.name.from_text(name, origin=None), True)
    assert candidates(name, K8S, ndots) == [n.to_text(omit_final_dot=True) for n in theirs]
