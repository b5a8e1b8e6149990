"""Benchmark: how fast exhaust_connections opens 500 PostgreSQL connections, vs pgbench.

One throwaway PostgreSQL 15 (max_connections=600) serves both, in the same
run, in alternating rounds:

* anchor: ``pgbench -n -C -c 16 -j 2 -t 32 -f select1.sql`` over TCP with the
  same user, password (scram-sha-256) and libpq settings (gssencmode=disable,
  as exhaust_connections uses). With ``-C`` every transaction opens a new
  connection, so pgbench's tps is its connection-establishment rate
  (connect + ``SELECT 1`` + disconnect);
* exhaust_connections(target=500, open_concurrency=16): wall-clock time of
  the whole action (helper process start, driver import, 500 connections
  opened and held), recorded in a throwaway ledger; then release and wait
  until the server is back at its baseline before the next round.

The ratio is exhaust_connections' rate (500 / median seconds) over pgbench's
median tps; >= 1.0 means the exhauster opens connections at least as fast as
pgbench. The machine is shared: only the same-run ratio means anything.

Run: .venv/bin/python benchmarks/db.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _peers import require

from chaos_ext._products.sandbox.servers import postgres
from chaos_ext._products.sandbox.servers.postgres import PostgresServer
from chaos_ext.db.actions import exhaust_connections, release_connections

TARGET = 500
CONCURRENCY = 16
PGBENCH_THREADS = 2
PASSWORD = secrets.token_urlsafe(16)  # a throwaway server; pgbench gets it in PGPASSWORD


def _pgbench(server: PostgresServer, script: Path) -> float:
    per_client = -(-TARGET // CONCURRENCY)
    env = {**os.environ, "PGPASSWORD": PASSWORD, "PGGSSENCMODE": "disable"}
    argv = [
        str(postgres.BIN / "pgbench"),
        "-n",
        "-C",
        "-c",
        str(CONCURRENCY),
        "-j",
        str(PGBENCH_THREADS),
        "-t",
        str(per_client),
        "-f",
        str(script),
        "-h",
        server.host,
        "-p",
        str(server.port),
        "-U",
        server.user,
        server.database,
    ]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=True)
    match = re.search(r"^tps = ([0-9.]+)", done.stdout, re.MULTILINE)
    if not match:
        raise SystemExit(f"cannot read pgbench's tps from:\n{done.stdout}\n{done.stderr}")
    return float(match.group(1))


def _client_count(server: PostgresServer) -> int:
    with server.admin_connect() as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
        ).fetchone()
    return int(row[0]) - 1  # not this admin connection


def _wait_baseline(server: PostgresServer) -> None:
    deadline = time.monotonic() + 60
    while _client_count(server) != 0:
        if time.monotonic() > deadline:
            raise SystemExit("the server did not return to its baseline")
        time.sleep(0.1)


def _exhaust(server: PostgresServer) -> float:
    credentials = {"user": server.user, "password": PASSWORD}
    started = time.monotonic()
    report = exhaust_connections(
        engine="postgresql",
        host=server.host,
        port=server.port,
        database=server.database,
        target=TARGET,
        open_concurrency=CONCURRENCY,
        hold_seconds=120,
        secrets=credentials,
    )
    seconds = time.monotonic() - started
    if report["opened"] != TARGET:
        raise SystemExit(f"exhaust_connections opened {report['opened']}, not {TARGET}")
    release_connections()  # this process recorded them: its own run
    _wait_baseline(server)
    return seconds


def main() -> None:
    require("db", "/usr/lib/postgresql/15/bin/pgbench", "/usr/lib/postgresql/15/bin/postgres")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    work = Path(tempfile.mkdtemp(prefix="gd-bench-db-"))
    os.environ["GAMEDAY_LEDGER"] = str(work / "ledger.sqlite3")
    script = work / "select1.sql"
    script.write_text("SELECT 1;\n")
    tps: list[float] = []
    seconds: list[float] = []
    with postgres.start(password=PASSWORD, max_connections=TARGET + 100) as server:
        for i in range(rounds):
            tps.append(_pgbench(server, script))
            _wait_baseline(server)
            seconds.append(_exhaust(server))
            print(
                f"round {i + 1}: pgbench -C {tps[-1]:.1f} connections/s; "
                f"exhaust_connections {TARGET} in {seconds[-1]:.2f} s "
                f"= {TARGET / seconds[-1]:.1f} connections/s",
                flush=True,
            )
    median_tps = statistics.median(tps)
    median_seconds = statistics.median(seconds)
    ratio = (TARGET / median_seconds) / median_tps
    print(f"medians: pgbench {median_tps:.1f} connections/s, exhaust {median_seconds:.2f} s")
    print(f"db connect_rate_ratio_vs_pgbench={ratio:.2f} seconds_to_500={median_seconds:.2f}")


if __name__ == "__main__":
    main()
