"""`gameday plan experiments/sandbox/*.json` against the running fragile sandbox.

Every action of the shipped experiments is planned against the live servers
(run in the sandbox's monitoring host with its vars.json, as `sandbox run`
runs experiments; then `sandbox run --dry-run`, the same plan): the values the
plan prints are the servers' own, read here independently (PostgreSQL's
``SHOW``, ss and ip in each namespace, the namespace file's inode), and the
targets are byte-identical before and after: every qdisc, class and filter
and the whole nftables ruleset of every sandbox namespace, the database's
standing connections (counted by the server and by ss), and the fault
ledger's files. The sandbox runs no Kubernetes API (no emulator objects here:
tests/node/test_node_plan_cli.py checks those).

An empty tree proves little, so the test first puts witnesses on the targets:
a tbf root on the app's interface (10 Gbit/s: it shapes nothing), an
nftables table of its own with a chain no packet enters, and a superuser
connection it holds. The plan must name the tbf it would replace, must not
take the foreign table for a rate limit of ours, and must leave all three.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from support.harness import ROOT
from support.netlab import kernel_has_netem, sh
from support.sandbox import listener, sandbox_cli, sandbox_env, state_of, targets

EXPERIMENTS = sorted((ROOT / "experiments" / "sandbox").glob("*.json"))
TBF = ("burst", "1mb", "latency", "50ms")
WITNESS_TABLE = "table inet plan_witness { chain unused { ip daddr 192.0.2.1 counter; }; }"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _admin(socket_dir: str) -> psycopg.Connection[Any]:
    """A superuser connection over the server's Unix socket (trusted, no password)."""
    return psycopg.connect(
        host=socket_dir, port=5432, user="postgres", dbname="postgres", autocommit=True
    )


def _standing(socket_dir: str, db_ns: str) -> tuple[list[tuple[Any, ...]], list[str]]:
    """The database's standing client connections: as the server lists them
    (pg_stat_activity) and as the kernel does (ss in the db namespace).

    Seen in two samples a second apart: the fragile app opens a connection per request
    and the exporter one per scrape, each gone in milliseconds; those come and go by
    themselves, and a connection the plan left behind would stand."""

    def sample() -> tuple[set[tuple[Any, ...]], set[str]]:
        with _admin(socket_dir) as conn:
            rows = conn.execute(
                "SELECT pid, backend_start, usename, client_addr::text, application_name"
                " FROM pg_stat_activity WHERE backend_type = 'client backend'"
                " AND pid <> pg_backend_pid()"
            ).fetchall()
        out = sh("ip", "netns", "exec", db_ns, "ss", "-Htn", "state", "established").stdout
        return {tuple(r) for r in rows}, {" ".join(line.split()[2:4]) for line in out.splitlines()}

    first = sample()
    time.sleep(1.0)
    second = sample()
    return sorted(first[0] & second[0], key=str), sorted(first[1] & second[1])


def _ledger(state: Path) -> dict[str, str]:
    """sha256 of every file of the fault ledger (the SQLite file, its journal, event log)."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(state.glob("ledger*"))
        if p.is_file()
    }


@pytest.fixture
def witnesses(sandbox: tuple[str, Path]) -> Iterator[dict[str, Any]]:
    """The sandbox's hosts found by their listeners, with a witness on each target."""
    prefix, state = sandbox
    app, db, dns = (listener(prefix, port) for port in (8080, 5432, 53))
    socket_dir = state_of(prefix, state)["services"]["postgres"]["dir"]
    tc = ["tc", "-n", app[0], "qdisc"]
    sh(*tc, "add", "dev", app[1], "root", "handle", "8030:", "tbf", "rate", "10gbit", *TBF)
    sh("ip", "netns", "exec", app[0], "nft", WITNESS_TABLE)
    held = _admin(socket_dir)
    try:
        yield {"app": app, "db": db, "dns": dns, "socket_dir": socket_dir, "held": held}
    finally:
        held.close()
        sh("ip", "netns", "exec", app[0], "nft", "delete table inet plan_witness", check=False)
        sh(*tc, "del", "dev", app[1], "root", check=False)


def _plan_in_sandbox(prefix: str, state: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """`gameday plan --var-file vars.json --json OUT experiments/sandbox/*.json` in the
    monitoring host, where the sandbox's servers are reachable."""
    argv = [
        *("ip", "netns", "exec", f"{prefix}-mon", sys.executable, "-m", "chaos_ext.cli.main"),
        *("plan", "--var-file", str(state / "sandbox" / prefix / "vars.json")),
        *("--json", str(out), *(str(p.relative_to(ROOT)) for p in EXPERIMENTS)),
    ]
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=300,
        env=sandbox_env(state),
        cwd=ROOT,
        check=False,
    )


def _snapshot(prefix: str, state: Path, found: dict[str, Any]) -> dict[str, Any]:
    return {
        "targets": targets(prefix),
        "connections": _standing(found["socket_dir"], found["db"][0]),
        "ledger": _ledger(state),
    }


def _actions(path: Path) -> list[str]:
    """The method's actions of an experiment file (refs followed), as the run sees them."""
    experiment = json.loads(path.read_text())
    declared = {a["name"]: a for a in experiment["method"] if "name" in a}
    steps = [declared.get(s["ref"], s) if "ref" in s else s for s in experiment["method"]]
    return [s["name"] for s in steps if s["type"] == "action"]


def _server_settings(socket_dir: str) -> dict[str, int]:
    found = {}
    with _admin(socket_dir) as conn:
        for name in ("max_connections", "superuser_reserved_connections"):
            (value,) = conn.execute(f"SHOW {name}").fetchall()[0]
            found[name] = int(value)
    return found


def test_plan_lists_every_target_with_real_values_and_touches_nothing(
    sandbox: tuple[str, Path], witnesses: dict[str, Any], tmp_path: Path
) -> None:
    prefix, state = sandbox
    app_ns, app_dev, app_addr = witnesses["app"]
    db_addr, dns_addr = witnesses["db"][2], witnesses["dns"][2]
    settings = _server_settings(witnesses["socket_dir"])
    before = _snapshot(prefix, state, witnesses)
    witness_pid = witnesses["held"].info.backend_pid
    assert any(row[0] == witness_pid for row in before["connections"][0])  # standing: seen

    planned = _plan_in_sandbox(prefix, state, tmp_path / "plan.json")
    dry = sandbox_cli(
        prefix,
        state,
        "run",
        "--dry-run",
        "--json",
        str(tmp_path / "dry.json"),
        "--journal-dir",
        str(tmp_path / "journals"),
        *map(str, EXPERIMENTS),
    )
    after = _snapshot(prefix, state, witnesses)

    assert after == before  # qdiscs, nft rulesets, standing connections, ledger: unchanged
    assert not (tmp_path / "journals").exists() or not list((tmp_path / "journals").iterdir())
    plans = json.loads((tmp_path / "plan.json").read_text())["plans"]
    rows = {row["activity"]: row for p in plans for row in p["actions"]}
    assert [p["experiment"] for p in plans] == [str(p.relative_to(ROOT)) for p in EXPERIMENTS]
    for p, path in zip(plans, EXPERIMENTS, strict=True):
        assert [row["activity"] for row in p["actions"]] == _actions(path)
    assert all(row["plan"] is not None for row in rows.values()), rows
    failed = sorted(
        (name, c["check"])
        for name, row in rows.items()
        for c in row["plan"]["preflight"]
        if not c["ok"]
    )
    # this host's kernel may lack netem: then (only) the latency fault's preflight fails
    netem = kernel_has_netem()
    assert failed == ([] if netem else [("delay-app-to-db-150ms", "kernel and CAP_NET_ADMIN")])
    assert planned.returncode == (0 if netem else 1), planned.stdout[-3000:] + planned.stderr
    assert dry.returncode == planned.returncode, dry.stdout[-3000:] + dry.stderr[-3000:]
    dry_rows = [
        (row["activity"], row["status"])
        for p in json.loads((tmp_path / "dry.json").read_text())["plans"]
        for row in p["actions"]
    ]
    assert dry_rows == [(name, row["status"]) for name, row in rows.items()]

    latency = rows["delay-app-to-db-150ms"]["plan"]["blast_radius"]
    assert (latency["target"], latency["interface"]) == (f"netns:{app_ns}", app_dev)
    assert latency["destinations"] == [f"{db_addr}/32"]
    assert latency["replaces_root"] == "tbf"  # the witness, read from the live tree
    assert any(line.startswith("qdisc tbf 8030:") for line in latency["current_tree"])
    exhaust = rows["take-every-free-connection-slot"]["plan"]["blast_radius"]
    assert exhaust["server"] == f"postgresql://{db_addr}:5432/app"
    assert exhaust["max_connections"] == settings["max_connections"]
    reserved = settings["superuser_reserved_connections"]
    assert exhaust["superuser_reserved_connections"] == reserved
    assert exhaust["would_hold"] == exhaust["max_connections"] - reserved - exhaust["in_use"]
    saturate = rows["hold-25-idle-tcp-connections-to-dnsmasq"]["plan"]["blast_radius"]
    assert (saturate["server"], saturate["port"], saturate["connections"]) == (dns_addr, 53, 25)
    limit = rows["limit-dns-packets-like-the-vpc-resolver"]["plan"]
    checks = {c["check"]: c for c in limit["preflight"]}
    assert checks["no rate limit there yet"]["ok"]  # the foreign table is not one of ours
    radius = limit["blast_radius"]
    assert radius["target"] == f"netns:{app_ns}" and radius["resolvers"] == [dns_addr]
    assert radius["netns"] == f"/run/netns/{app_ns}"
    inode = Path(f"/run/netns/{app_ns}").stat()
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert radius["netns_key"] == f"{boot_id}:{inode.st_dev}:{inode.st_ino}"
    assert radius["table"].startswith("inet gameday_dnsrate_")
    load = rows["load-on-search"]["plan"]["blast_radius"]
    assert load["urls"] == [f"http://{app_addr}:8080/search"]

    text = planned.stdout + planned.stderr
    for shown in (
        f"max_connections={settings['max_connections']}",
        f"target=netns:{app_ns}",
        f"interface={app_dev}",
        f"resolvers={dns_addr}",
        "replaces_root=tbf",
        "table=inet gameday_dnsrate_",
    ):
        assert shown in text, shown
