"""DNS benchmark: flood_dns's UDP throughput vs dnsperf, and one TCP holder's capacity.

Run on its own: ``.venv/bin/python benchmarks/dns.py``.

1. Against the same throwaway dnsmasq in the same run, alternate rounds of
   ``dnsperf`` and ``flood_dns`` at full speed with comparable concurrency
   (8 sockets/clients, 200 queries outstanding; flood_dns split over 2
   worker processes, dnsperf runs a send and a receive thread) and compare the median
   queries/s: the ratio says whether our generator, not dnsmasq, is the
   bottleneck (goal >= 0.8).
2. ``saturate_dnsmasq_tcp`` opens 10,000 idle TCP connections to a local
   listener started here (dnsmasq stops accepting at 20 children) and the
   helper's resident memory is read from /proc (goal: under 200 MB).
3. ``limit_dns_rate(pps=100)`` on a client namespace, ``flood_dns`` offering
   1,000 QPS from it for 30 s to dnsmasq in a second namespace: the answered
   rate over the asked rate (the kernel's full bucket at the start adds
   ``burst / 30 s``: about 1.03 with the default burst of one second).

4. ``inject_dns_errors`` on a client namespace, with a pattern no query
   matches (pure pass-through: every query parsed, matched, forwarded and
   its answer restored): ``dnsperf`` from the client namespace to dnsmasq in
   the server namespace, alternating rounds without and with the injector;
   the ratio of the median answers/s (goal >= 0.8). UDP queries that cannot
   match stay in the kernel; the same over TCP (``dnsperf -m tcp``: every new
   connection goes through the proxy, which forwards each query) measures
   the proxy's own forwarding.

Last line:
``dns qps_ratio_vs_dnsperf=<x> held_tcp=<n> rss_mb=<m> rate_limit_accuracy=<measured/asked>
dns_errors_passthrough_ratio=<x> dns_errors_tcp_proxy_ratio=<y>``.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _peers import require

ROOT = Path(__file__).resolve().parents[1]
# This file is named dns.py: its folder first on sys.path would shadow dnspython's ``dns``.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from chaos_ext._core import procfs as _procfs  # noqa: E402
from chaos_ext._products.sandbox.servers import dnsmasq  # noqa: E402

NAME = "www.example.test"
ROUNDS = 3
SECONDS = 4
CLIENTS = 8
OUTSTANDING = 200
WORKERS = 2
CONNECTIONS = 10_000
LIMIT_PPS = 100
OFFERED_QPS = 1000
LIMIT_SECONDS = 30
PASSTHROUGH_ROUNDS = 5


def dnsperf_qps(
    server: dnsmasq.Dnsmasq,
    data: Path,
    prefix: tuple[str, ...] = (),
    address: str = "",
    mode: tuple[str, ...] = (),
    *,
    retried: bool = False,
) -> float:
    out = subprocess.run(
        [
            *prefix,
            "dnsperf",
            *mode,
            "-s",
            address or server.address,
            "-p",
            str(server.port),
            "-d",
            str(data),
            "-c",
            str(CLIENTS),
            "-q",
            str(OUTSTANDING),
            "-l",
            str(SECONDS),
            "-t",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=SECONDS + 30,
        check=False,
    )
    match = re.search(r"Queries per second:\s+([\d.]+)", out.stdout)
    if match is None and not retried:  # dnsperf -m tcp gives up now and then on dnsmasq
        print(f"dnsperf failed ({out.stderr.strip()[-200:]}); once more")
        return dnsperf_qps(server, data, prefix, address, mode, retried=True)
    assert match, out.stdout[-2000:] + out.stderr
    return float(match[1])


def flood_qps(server: dnsmasq.Dnsmasq) -> float:
    from chaos_ext.dns.actions import flood_dns  # noqa: PLC0415

    report = flood_dns(
        server.address,
        names=[NAME],
        port=server.port,
        qps=100_000,
        duration_seconds=SECONDS,
        timeout_seconds=1.0,
        concurrency=OUTSTANDING,
        sockets=CLIENTS,
        workers=WORKERS,
    )
    return float(report["achieved_qps"])


def throughput_ratio() -> float:
    with dnsmasq.start(records={NAME: "10.0.0.5"}) as server, tempfile.TemporaryDirectory() as d:
        data = Path(d) / "queries.txt"
        data.write_text(f"{NAME} A\n")
        ours, theirs = [], []
        for round_ in range(ROUNDS):
            theirs.append(dnsperf_qps(server, data))
            ours.append(flood_qps(server))
            print(
                f"round {round_ + 1}: dnsperf {theirs[-1]:,.0f} q/s, flood_dns {ours[-1]:,.0f} q/s"
            )
    ratio = statistics.median(ours) / statistics.median(theirs)
    print(
        f"median: dnsperf {statistics.median(theirs):,.0f} q/s,"
        f" flood_dns {statistics.median(ours):,.0f} q/s, ratio {ratio:.2f}"
    )
    return ratio


def listener() -> None:
    """Child mode: accept and keep every connection for 120 s at most."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with socket.socket() as srv, selectors.DefaultSelector() as sel:
        srv.bind(("127.0.0.1", 0))
        srv.listen(65_535)
        srv.setblocking(False)
        print(srv.getsockname()[1], flush=True)
        sel.register(srv, selectors.EVENT_READ)
        kept = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for _ in sel.select(0.5):
                while True:
                    try:
                        kept.append(srv.accept()[0])
                    except BlockingIOError:
                        break


def held_connections() -> tuple[int, float]:
    from chaos_ext.dns.actions import release_dnsmasq_tcp, saturate_dnsmasq_tcp  # noqa: PLC0415

    child = subprocess.Popen(
        [sys.executable, __file__, "--listener"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        held = saturate_dnsmasq_tcp(
            "127.0.0.1", port=port, connections=CONNECTIONS, hold_seconds=60
        )
        time.sleep(1)
        rss = (_procfs.rss_kib(held["pid"]) or 0) / 1024
        print(
            f"holder: opened {held['opened']}, held {held['held']}, failed {held['failed']},"
            f" RSS {rss:.1f} MB"
        )
        release_dnsmasq_tcp()
        return int(held["held"]), rss
    finally:
        child.kill()
        child.wait(timeout=10)


def rate_limit_accuracy() -> float:
    from support.dns_netlab import flood_from, resolver_pair  # noqa: PLC0415

    from chaos_ext.dns.actions import limit_dns_rate, remove_dns_rate_limit  # noqa: PLC0415
    from chaos_ext.dns.probes import dns_rate_limit_drops  # noqa: PLC0415

    with resolver_pair() as pair:
        limit_dns_rate(pps=LIMIT_PPS, target=pair.target)
        try:
            report = flood_from(pair, qps=OFFERED_QPS, duration_seconds=LIMIT_SECONDS)
            drops = dns_rate_limit_drops(target=pair.target)
        finally:
            remove_dns_rate_limit(target=pair.target)
    accuracy = report["achieved_qps"] / LIMIT_PPS
    print(
        f"rate limit: asked {LIMIT_PPS} pps, offered {report['sent_qps']:,.0f} q/s for"
        f" {LIMIT_SECONDS} s, answered {report['achieved_qps']:.1f}/s; kernel counted"
        f" {drops['packets']} packets, dropped {drops['dropped']}"
    )
    return accuracy


def passthrough_ratios() -> tuple[float, float]:
    """dnsperf through the DNS error injector (nothing matches) over dnsperf direct: UDP
    (the kernel's prefilter keeps the queries away from the proxy) and TCP (every new
    connection goes through the proxy, which forwards each query)."""
    from support.dns_netlab import SERVER_IP, resolver_pair  # noqa: PLC0415

    from chaos_ext.dns.actions import inject_dns_errors, remove_dns_errors  # noqa: PLC0415

    ratios = []
    with resolver_pair() as pair, tempfile.TemporaryDirectory() as d:
        data = Path(d) / "queries.txt"
        data.write_text(f"{NAME} A\n")
        prefix = ("ip", "netns", "exec", pair.client_ns)
        for mode in ((), ("-m", "tcp")):
            direct, proxied = [], []
            for round_ in range(PASSTHROUGH_ROUNDS):
                direct.append(dnsperf_qps(pair.server, data, prefix, SERVER_IP, mode))
                inject_dns_errors(
                    ["nothing-matches.invalid"],
                    "nxdomain",
                    target=pair.target,
                    resolvers=[SERVER_IP],
                    duration_seconds=SECONDS + 60,
                )
                try:
                    proxied.append(dnsperf_qps(pair.server, data, prefix, SERVER_IP, mode))
                finally:
                    remove_dns_errors(target=pair.target)
                print(
                    f"{mode[-1] if mode else 'udp'} round {round_ + 1}: dnsperf direct"
                    f" {direct[-1]:,.0f} q/s, through the DNS error injector {proxied[-1]:,.0f} q/s"
                )
            ratios.append(statistics.median(proxied) / statistics.median(direct))
            print(
                f"median: direct {statistics.median(direct):,.0f} q/s, through the injector"
                f" {statistics.median(proxied):,.0f} q/s, ratio {ratios[-1]:.2f}"
            )
    return ratios[0], ratios[1]


def main() -> None:
    require("dns", "dnsperf", "dnsmasq")
    # no options: --help says what is measured instead of starting the run
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    with tempfile.TemporaryDirectory() as ledger_dir:
        os.environ["GAMEDAY_LEDGER"] = str(Path(ledger_dir) / "ledger.sqlite3")
        ratio = throughput_ratio()
        held, rss = held_connections()
        accuracy = rate_limit_accuracy()
        passthrough, tcp = passthrough_ratios()
    print(
        f"dns qps_ratio_vs_dnsperf={ratio:.2f} held_tcp={held} rss_mb={rss:.1f}"
        f" rate_limit_accuracy={accuracy:.3f} dns_errors_passthrough_ratio={passthrough:.2f}"
        f" dns_errors_tcp_proxy_ratio={tcp:.2f}"
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["--listener"]:
        listener()
    elif sys.argv[1:] == ["--passthrough-only"]:  # the DNS error injector's figure alone
        with tempfile.TemporaryDirectory() as ledger_dir:
            os.environ["GAMEDAY_LEDGER"] = str(Path(ledger_dir) / "ledger.sqlite3")
            udp, tcp = passthrough_ratios()
            print(
                f"dns dns_errors_passthrough_ratio={udp:.2f} dns_errors_tcp_proxy_ratio={tcp:.2f}"
            )
    else:
        main()
