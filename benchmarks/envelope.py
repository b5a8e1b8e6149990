"""Envelope benchmark: runs to find a real breaking point, against a linear sweep.

Run on its own: ``.venv/bin/python benchmarks/envelope.py [--repeats K]``.

The system: a real HTTP service (tests/support/envelope_app.py) that resolves
a name over TCP at a real Debian dnsmasq on every request, and the real
fault ``saturate_dnsmasq_tcp`` holding N idle TCP connections to that
dnsmasq. dnsmasq serves TCP with 20 children, so the true breaking point is
N = 20 (the app then waits for its DNS timeout). The hypothesis: the median
request takes under 300 ms.

1. ``run_envelope`` (the code behind ``gameday envelope``) searches
   connections = 1..64 at resolution 1 with K repeats a side.
2. The anchor, in the same run, through the same runner: a linear sweep at
   the same resolution, 1, 2, 3, ... until the first run that deviates (the
   fewest runs a sweep can take; it does no repeats).

Goal: envelope runs <= ceil(log2((HIGH-LOW)/resolution)) + 2 + 2K, and the
boundary (the mildest magnitude that deviated) within the resolution of the
true one, which the sweep confirms independently.

Last line: ``envelope runs=<n> sweep_runs=<m> error=<e> within_resolution=<true|false>``.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/dns.py beside this file would shadow dnspython's ``dns``: drop this folder.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from rich.console import Console  # noqa: E402
from support.dns_checks import RECORDS, ZONES  # noqa: E402
from support.envelope_app import DnsBackedApp, dns_experiment  # noqa: E402

from chaos_ext._core.ledger import Ledger  # noqa: E402
from chaos_ext._products.envelope.run import run_envelope  # noqa: E402
from chaos_ext._products.envelope.spec import apply_magnitude, settings_from  # noqa: E402
from chaos_ext._products.sandbox.servers import dnsmasq  # noqa: E402
from chaos_ext._runner.execute import RunOptions, run_experiment  # noqa: E402

LOW, HIGH, RESOLUTION = 1, 64, 1
TRUE_BREAKING_POINT = 20  # dnsmasq's TCP child limit


def sweep(
    exp: dict[str, Any], settings: Any, ledger: Ledger, out: Path, quiet: Console
) -> tuple[int, int | None]:
    """Runs of a linear sweep from LOW up to the first deviation, and where it was."""
    runs = 0
    for magnitude in range(LOW, HIGH + 1, RESOLUTION):
        runs += 1
        options = RunOptions(journal_path=out / f"sweep-{magnitude:02d}.json")
        result = run_experiment(
            out / "exp.json", apply_magnitude(exp, settings, magnitude), options, ledger, quiet
        )
        print(f"  sweep run {runs}: connections={magnitude} {result.outcome}", flush=True)
        if result.outcome == "deviated":
            return runs, magnitude
        if result.outcome != "held":
            raise SystemExit(f"sweep run at {magnitude} was {result.outcome}: cannot compare")
    return runs, None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1, help="K repeats a side (default 1)")
    args = parser.parse_args()
    logging.getLogger("chaostoolkit").setLevel(logging.ERROR)  # chaoslib's per-run warnings
    work = Path(tempfile.mkdtemp(prefix="gameday-bench-envelope-"))
    os.environ["GAMEDAY_LEDGER"] = str(work / "ledger.sqlite3")
    ledger, quiet = Ledger(work / "ledger.sqlite3"), Console(file=open(os.devnull, "w"))  # noqa: SIM115
    goal = math.ceil(math.log2((HIGH - LOW) / RESOLUTION)) + 2 + 2 * args.repeats
    with (
        dnsmasq.start(records=RECORDS, local_domains=ZONES) as dns,
        DnsBackedApp(dns.address, dns.port) as app,
    ):
        exp = dns_experiment(app, dns, {})
        overrides = {
            "vary": f"hold-dns-tcp.connections={LOW}..{HIGH}",
            "resolution": RESOLUTION,
            "repeats": args.repeats,
        }
        settings = settings_from(exp, overrides, "bench")
        started = time.monotonic()
        result = run_envelope(
            work / "exp.json",
            exp,
            settings,
            RunOptions(work / "x.json"),
            ledger,
            quiet,
            work / "envelope",
        )
        envelope_s = time.monotonic() - started
        doc = result.document
        for run in doc["runs"]:
            print(f"  envelope run {run['run']}: connections={run['value']} {run['outcome']}")
        started = time.monotonic()
        sweep_runs, sweep_found = sweep(exp, settings, ledger, work / "sweep", quiet)
        sweep_s = time.monotonic() - started
    held, deviated = doc["result"]["held"], doc["result"]["deviated"]
    error = abs(deviated - TRUE_BREAKING_POINT) if deviated is not None else math.inf
    within = (
        deviated is not None
        and held is not None
        and held < TRUE_BREAKING_POINT <= deviated
        and deviated - held <= RESOLUTION
    )
    runs = len(doc["runs"])
    print(
        f"envelope: {doc['result']['summary']} ({doc['result']['agreement']}) in {runs} runs, "
        f"{envelope_s:.0f} s; goal <= {goal} runs: {'met' if runs <= goal else 'MISSED'}"
    )
    print(
        f"linear sweep (anchor): first deviation at {sweep_found} in {sweep_runs} runs, "
        f"{sweep_s:.0f} s; true breaking point {TRUE_BREAKING_POINT} (dnsmasq's TCP children)"
    )
    print(
        f"envelope runs={runs} sweep_runs={sweep_runs} error={error:g} "
        f"within_resolution={'true' if within else 'false'}"
    )


if __name__ == "__main__":
    main()
