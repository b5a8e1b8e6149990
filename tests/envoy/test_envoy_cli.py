"""``gameday audit envoy``: a table, and exit 0 (all pass) / 1 (a rule failed) / 3 (bad input)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support.envoy_dumps import COMPLIANT, DEFAULTS, AdminServer

Gameday = Callable[..., subprocess.CompletedProcess[str]]


def test_compliant_gateway_over_the_admin_url_exits_0(
    gameday: Gameday, admin_server: AdminServer
) -> None:
    admin_server.routes["/config_dump"] = (200, COMPLIANT.read_bytes())
    result = gameday("audit", "envoy", "--source", admin_server.url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Envoy audit of" in result.stdout
    assert result.stdout.count("PASS") == 45 and "FAIL" not in result.stdout
    assert "45 checks of 21 rules on 0.0.0.0_8080, 0.0.0.0_8443: 45 passed, 0 failed" in (
        result.stdout
    )


def test_envoy_defaults_exit_1_with_failing_rows(gameday: Gameday) -> None:
    result = gameday("audit", "envoy", "--source", str(DEFAULTS), "--listener", "0.0.0.0_8080")
    assert result.returncode == 1, result.stderr
    assert result.stdout.count("FAIL") == 15
    assert "use-remote-address" in result.stdout and "absent" in result.stdout
    # the two route rules pass: the fixture's routes set timeout and idle_timeout 15s
    assert "21 checks of 21 rules on 0.0.0.0_8080: 6 passed, 15 failed" in result.stdout


def test_json_output_is_the_probe_report(gameday: Gameday) -> None:
    result = gameday("audit", "envoy", "--source", str(DEFAULTS), "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["passed"] is False and report["summary"]["failed"] == 35
    row = next(r for r in report["results"] if r["rule"] == "listener-buffer-limit")
    assert row == {
        "rule": "listener-buffer-limit",
        "title": "listener per_connection_buffer_limit_bytes is at most 32 KiB",
        "severity": "high",
        "listener": "0.0.0.0_8080",
        "status": "fail",
        "pass": False,
        "expected": "<= 32768",
        "found": "absent",
        "path": "configs[2].dynamic_listeners[0].active_state.listener"
        ".per_connection_buffer_limit_bytes",
        "envoy_default": "1048576 (1 MiB)",
        "note": "absent: Envoy uses 1048576 (1 MiB)",
        "detail": None,
        "source": "Envoy docs: Configuring Envoy as an edge proxy, TCP proxies should configure: "
        "listener buffer limits to 32 KiB "
        "(https://www.envoyproxy.io/docs/envoy/latest/configuration/best_practices/edge)",
    }
    assert report["input"] == {
        "kind": "config_dump",
        "syntax": "JSON",
        "description": "Envoy /config_dump (envoy.admin.v3)",
        "notes": [
            "not parsed, no rule reads them: ScopedRoutesConfigDump, SecretsConfigDump",
            "3 static cluster(s) not audited (prometheus_stats, agent, xds-grpc): the proxy's "
            "own upstreams (control plane, stats, tracing); a rule with "
            "bootstrap:static_resources.clusters[...] audits one",
            "static listener 0.0.0.0_15090 takes HTTP but was not audited: --listener "
            "'0.0.0.0_15090' audits it",
            "static listener 0.0.0.0_15021 (Istio's health port: its default ingress Service "
            "exposes it) takes HTTP but was not audited: --listener '0.0.0.0_15021' audits it",
        ],
    }
    assert report["proxy"]["role"] == "gateway" and report["profile"] == "envoy-edge"


def test_rules_file_can_relax_a_gate(gameday: Gameday, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "defaults: false\n"
        "rules:\n"
        "  - id: h2-streams\n"
        "    title: HTTP/2 streams capped at 1000\n"
        "    at: hcm:http2_protocol_options.max_concurrent_streams\n"
        "    op: '<='\n"
        "    value: 1000\n"
    )
    result = gameday("audit", "envoy", "--source", str(COMPLIANT), "--rules", str(rules))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 checks of 1 rules" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--source", "/nonexistent/dump.json"], "cannot read '/nonexistent/dump.json'"),
        (["--source", "ftp://gw/config_dump"], "unknown scheme 'ftp'"),
        (["--source", str(COMPLIANT), "--listener", "0.0.0.0_9999"], "no listener named"),
        (["--source", str(COMPLIANT), "--profile", "sidecar"], "not what profile 'sidecar' is for"),
        (["--source", str(COMPLIANT), "--rules", "/nonexistent.yaml"], "rules file"),
    ],
)
def test_invalid_input_exits_3(gameday: Gameday, args: list[str], message: str) -> None:
    result = gameday("audit", "envoy", *args)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "invalid:" in result.stderr and message in " ".join(result.stderr.split())


def test_malformed_json_and_unreachable_admin_exit_3(
    gameday: Gameday, tmp_path: Path, closed_port: int
) -> None:
    broken = tmp_path / "dump.json"
    broken.write_bytes(COMPLIANT.read_bytes()[:1000])
    result = gameday("audit", "envoy", "--source", str(broken))
    assert result.returncode == 3 and "not valid JSON" in result.stderr, result.stderr
    result = gameday("audit", "envoy", "--source", f"http://127.0.0.1:{closed_port}")
    assert result.returncode == 3 and "cannot reach the Envoy admin" in result.stderr


def test_help_teaches_sources_and_exit_codes(gameday: Gameday) -> None:
    result = gameday("audit", "envoy", "--help")
    assert result.returncode == 0
    for text in (
        "pod://istio-system?selector=istio=ingressgateway",
        "port-forward",
        "exit codes",
        "envoy-edge",
        "hardened",
        "sidecar",
        "UNREADABLE",
        "standard input",
    ):
        assert text in result.stdout
