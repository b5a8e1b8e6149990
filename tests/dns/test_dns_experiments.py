"""The shipped DNS experiments validate, and run end to end against a real dnsmasq."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.dns_checks import tcp_resolves
from support.harness import ROOT, cli_env, gameday_argv

from chaos_ext._core.ledger import Ledger
from chaos_ext._products.sandbox.servers import dnsmasq
from chaos_ext._products.sandbox.servers.dnsmasq import Dnsmasq

SATURATION = ROOT / "experiments" / "dns-saturation.json"
AMPLIFICATION = ROOT / "experiments" / "dns-search-amplification.json"
SEARCH6 = [
    "default.svc.cluster.local",
    "svc.cluster.local",
    "cluster.local",
    "ec2.internal",
    "corp.example.com",
    "example.net",
]


def _run(experiment: Path, ledger: Path, tmp: Path, env: dict[str, str]) -> tuple[int, Any]:
    result = subprocess.run(
        gameday_argv("run", "--journal", str(tmp / "journal.json"), str(experiment)),
        env={**cli_env(ledger), **env},
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    return result.returncode, json.loads((tmp / "journal.json").read_text())


def test_shipped_experiments_validate(tmp_path: Path, ledger_path: Path) -> None:
    result = subprocess.run(
        gameday_argv("validate", str(SATURATION), str(AMPLIFICATION)),
        env=cli_env(ledger_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _saturation_env(server: Dnsmasq, held: int) -> dict[str, str]:
    return {
        "GAMEDAY_DNS_SERVER": server.address,
        "GAMEDAY_DNS_PORT": str(server.port),
        "GAMEDAY_DNS_PROBE_SERVER": server.address,
        "GAMEDAY_DNS_PROBE_PORT": str(server.port),
        "GAMEDAY_DNS_PROBE_SAMPLES": "5",
        "GAMEDAY_DNS_PROBE_TIMEOUT_SECONDS": "1.0",  # the default; 0.3 s was unsteady at load 6
        "GAMEDAY_DNS_HELD_CONNECTIONS": str(held),
        "GAMEDAY_DNS_HOLD_SECONDS": "60",
    }


@pytest.mark.parametrize(("held", "exit_code"), [(20, 1), (10, 0)])
def test_saturation_experiment_deviates_only_when_all_20_slots_are_held(
    dns_server: Dnsmasq, dns_ledger: Path, tmp_path: Path, held: int, exit_code: int
) -> None:
    code, journal = _run(SATURATION, dns_ledger, tmp_path, _saturation_env(dns_server, held))
    assert code == exit_code, journal["gameday"]
    after = journal["steady_states"]["after"]["probes"][0]["output"]
    assert after["timeout_ratio"] == (1.0 if held == 20 else 0.0)
    assert journal["run"][0]["output"]["held"] == held
    assert journal["rollbacks"][0]["output"]["undone"] == 1
    assert tcp_resolves(dns_server)
    assert Ledger(dns_ledger).open_entries() == []


@pytest.fixture
def cluster_dns() -> Iterator[Dnsmasq]:
    """A resolver that knows the external names and answers NXDOMAIN for every suffix."""
    zones = [*SEARCH6, "example.com"]
    records = {"api.payments.example.com": "203.0.113.10", "db.example.com": "203.0.113.11"}
    with dnsmasq.start(records=records, local_domains=zones, log_queries=True) as server:
        yield server


def test_amplification_experiment_reports_seven_queries_per_lookup(
    cluster_dns: Dnsmasq, dns_ledger: Path, tmp_path: Path
) -> None:
    env = {
        "GAMEDAY_DNS_SERVER": cluster_dns.address,
        "GAMEDAY_DNS_PORT": str(cluster_dns.port),
        "GAMEDAY_DNS_NAMES": json.dumps(["api.payments.example.com", "db.example.com"]),
        "GAMEDAY_DNS_QPS": "700",
        "GAMEDAY_DNS_DURATION_SECONDS": "3",
        "GAMEDAY_DNS_PROBE_SAMPLES": "10",
    }
    code, journal = _run(AMPLIFICATION, dns_ledger, tmp_path, env)
    assert code == 0, journal["gameday"]
    flood = next(r["output"] for r in journal["run"] if r["activity"]["type"] == "action")
    assert flood["queries_per_lookup"] == pytest.approx(7, abs=0.05)
    # six NXDOMAIN suffixes per finished lookup, fewer for the lookups the end cut short
    assert flood["answer"] == flood["lookups_answered"] and flood["lookups_failed"] == 0
    assert 6 * flood["answer"] <= flood["nxdomain"]
    assert flood["nxdomain"] <= 6 * (flood["answer"] + flood["lookups_unfinished"])
    assert flood["sent_qps"] == pytest.approx(700, rel=0.05)
    logged = cluster_dns.query_counts()
    suffixed = logged[("A", "db.example.com.ec2.internal")]
    first = logged[("A", "db.example.com.default.svc.cluster.local")]
    # each lookup asks every suffix in turn; only timeouts and the end of the flood cut chains
    assert 0 <= first - suffixed <= flood["timeout"] + flood["lookups_unfinished"]
    assert suffixed > 100
    assert Ledger(dns_ledger).open_entries() == []


def test_validate_refuses_absurd_dns_arguments(tmp_path: Path, ledger_path: Path) -> None:
    flood = {
        "type": "action",
        "name": "flood",
        "provider": {
            "type": "python",
            "module": "chaos_ext.dns.actions",
            "func": "flood_dns",
            "arguments": {"server": "10.96.0.10", "names": ["api.example.com"], "qps": 10_000_000},
        },
    }
    hold = {
        "type": "action",
        "name": "hold",
        "provider": {
            "type": "python",
            "module": "chaos_ext.dns.actions",
            "func": "saturate_dnsmasq_tcp",
            "arguments": {"server": "kube-dns"},
        },
    }
    for name, activity, message in (("flood.json", flood, "qps"), ("hold.json", hold, "IP")):
        path = tmp_path / name
        path.write_text(json.dumps({"title": "t", "description": "d", "method": [activity]}))
        result = subprocess.run(
            gameday_argv("validate", str(path)),
            env=cli_env(ledger_path),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 3, result.stdout + result.stderr
        assert message in result.stdout + result.stderr
