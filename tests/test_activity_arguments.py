"""Every activity refuses a bad argument when it is called, before touching anything.

``gameday validate`` and the activity itself run the same check
(:func:`chaos_ext._core.validation.check_activity_arguments`). Here each activity that
``chaos discover chaos_ext`` lists is called the way plain ``chaos run`` calls it
(chaoslib's ``run_python_activity``) with one bad argument, in a child process
whose CPython audit hook records every network and process event: each call must
fail with ``InvalidArgument`` and record none, the Prometheus listener given as
``prometheus_url`` must see no connection and the ledger must stay empty.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.harness import cli_env

import chaos_ext
from chaos_ext._core.ledger import Ledger
from chaos_ext._runner.experiments import ExperimentInvalid, validate_experiment

CHAOS = Path(sys.executable).with_name("chaos")

# One bad argument per activity, with what the refusal must say. Activities with
# a semantic check get a value of the right type that the check refuses; the
# others a value of the wrong type.
BAD: dict[str, tuple[dict[str, Any], str]] = {
    "exhaust_connections": ({"engine": "oracle"}, "engine"),
    "release_connections": ({"port": "5432"}, "port: expected int"),
    "connection_headroom": ({"engine": "oracle"}, "engine"),
    "http_readiness": ({"url": "ftp://127.0.0.1/"}, "is not an http(s) URL"),
    "flood_dns": ({"server": "127.0.0.1", "names": ["a.test"], "qps": -5}, "qps"),
    "release_dnsmasq_tcp": ({"port": "53"}, "port: expected int"),
    "stop_dns_flood": ({"server": 53}, "server: expected str"),
    "saturate_dnsmasq_tcp": ({"server": "127.0.0.1", "connections": 0}, "connections"),
    "dns_resolution_stats": (
        {"server": "127.0.0.1", "name": "a.test", "protocol": "pigeon"},
        "protocol",
    ),
    "dnsmasq_child_processes": ({"pid": "1"}, "pid: expected int"),
    "limit_dns_rate": ({"pps": 0}, "pps: 0 is outside"),
    "inject_dns_errors": ({"patterns": ["a*.test"], "error": "nxdomain"}, "'a*.test' is not a"),
    "remove_dns_errors": ({"target": "ssh:"}, "is not a target"),
    "remove_dns_rate_limit": ({"target": "ssh:"}, "is not a target"),
    "dns_rate_limit_drops": ({"target": "netns:bad name"}, "is not a target"),
    "dns_rate_limit_supported": ({"target": "netns:bad name"}, "is not a target"),
    "alerts_quiet": ({"firing": ["pagerduty"]}, "alerts.firing ['pagerduty']"),
    "edge_config_audit": ({"source": "gopher://127.0.0.1:15000"}, "gopher"),
    "overload_state": ({"selector": {"bad label": "x"}}, "is not a Prometheus label name"),
    "rollback_faults": ({"include_dead_runs": "yes"}, "include_dead_runs: expected bool"),
    "open_faults": ({"kind": 3}, "kind: expected str"),
    "drive_http_load": ({"urls": ["ftp://127.0.0.1/"], "duration_seconds": 1}, "ftp"),
    "stop_http_load": ({"include_buckets": "no"}, "include_buckets: expected bool"),
    "load_window_stats": ({"from_seconds": "a"}, "from_seconds: expected float"),
    "error_onset": ({"classes": {"db-connect": ""}}, "classes: expected a mapping"),
    "add_latency": (
        {"interface": "lo", "delay_seconds": 0.01, "destinations": ["not-a-cidr"]},
        "is not a CIDR",
    ),
    "remove_latency": ({"interface": "eth0;reboot"}, "is not a valid name"),
    "latency_supported": ({"interface": "eth0;reboot"}, "is not a valid name"),
    "qdisc_state": ({"interface": "eth0;reboot"}, "is not a valid name"),
    "measure_rtt": ({"host": "127.0.0.1", "port": 70000}, "port"),
    "drain_nodes": ({"label_selector": "pool=a", "count": 1, "max_fraction": 2.0}, "max_fraction"),
    "uncordon_drained_nodes": ({"include_dead_runs": "no"}, "include_dead_runs: expected bool"),
    "deployment_ready_ratio": ({"name": 5}, "name: expected str"),
    "hpa_replicas": ({"name": "web", "wait_seconds": "x"}, "wait_seconds: expected float"),
    "nodes_ready": ({"label_selector": 3}, "label_selector: expected str"),
    "pods_pending": ({"min_age_seconds": "x"}, "min_age_seconds: expected float"),
    "catalog_check": ({"name": "no-such-probe"}, "no probe 'no-such-probe'"),
    "catalog_probe": ({"name": "http-error-ratio", "parameters": {"job": 'a"b'}}, "double quote"),
    "histogram_quantile": ({"metric": "http_seconds", "quantile": 2.0}, "quantile"),
    "query_series": (
        {"expr": "up", "window_seconds": 60, "step_seconds": 300},
        "longer than window_seconds",
    ),
    "query_stats": ({"expr": "sum(rate(x[5m]"}, "unclosed left parenthesis"),
    "query_value": ({"expr": "sum(rate(x[5m]"}, "unclosed left parenthesis"),
    "slo_fraction": ({"expr": "up", "op": "~"}, "op"),
    "slo_holds": ({"expr": "up", "min_fraction": 2.0}, "min_fraction"),
    "change_sidecar_template": (
        {"values_patch": {"a": 1}, "configmap_name": "Bad Name"},
        "is not a valid name",
    ),
    "restore_sidecar_template": ({"include_dead_runs": "yes"}, "include_dead_runs: expected bool"),
    "rollout_drifted_workloads": ({"parallel": 0}, "parallel"),
    "sidecar_drift": ({"template_format": "helm2"}, "template_format"),
}


def _discovered() -> list[dict[str, Any]]:
    return list(chaos_ext.discover(discover_system=False)["activities"])


class CountingListener:
    """A TCP listener that counts connections (stands for Prometheus, Envoy, a DB ...)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[CountingListener]:
    counting = CountingListener()
    yield counting
    counting.close()


@pytest.fixture
def control_listener() -> Iterator[CountingListener]:
    counting = CountingListener()
    yield counting
    counting.close()


def test_the_table_covers_every_discovered_activity() -> None:
    names = {a["name"] for a in _discovered()}
    assert len(names) >= 38
    assert names == set(BAD), (sorted(names - set(BAD)), sorted(set(BAD) - names))


def test_every_activity_refuses_a_bad_argument_at_run_time_without_touching_anything(
    listener: CountingListener, control_listener: CountingListener, ledger_path: Path
) -> None:
    cases = [
        {"module": a["mod"], "func": a["name"], "arguments": BAD[a["name"]][0]}
        for a in _discovered()
    ]
    # the positive control: a good query does reach its listener, and the hook sees it
    cases.append(
        {
            "module": "chaos_ext.prometheus.probes",
            "func": "query_value",
            "arguments": {"expr": "up"},
            "configuration": {"prometheus_url": f"http://127.0.0.1:{control_listener.port}"},
        }
    )
    url = f"http://127.0.0.1:{listener.port}"
    request = {
        "cases": cases,
        "configuration": {"prometheus_url": url, "kubeconfig_path": "/nonexistent/kubeconfig"},
    }
    done = subprocess.run(
        [sys.executable, "-m", "support.refusals"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=240,
        env=cli_env(ledger_path),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    *refused, control = json.loads(done.stdout)
    assert any(e.startswith("socket.connect") for e in control["events"]), control
    assert control_listener.accepted >= 1
    results = {r["func"]: r for r in refused}
    assert set(results) == set(BAD)
    for name, (_, expected) in BAD.items():
        result = results[name]
        assert result["error"].startswith("chaos_ext.errors.InvalidArgument: "), (name, result)
        assert expected in result["error"], (name, result["error"])
        assert result["events"] == [], (name, result["events"])
    assert listener.accepted == 0
    assert not ledger_path.exists() or Ledger(ledger_path).history() == []


def test_validate_and_run_time_give_the_same_verdict() -> None:
    """What `gameday validate` says about each bad argument is what the call says."""
    by_name = {a["name"]: a for a in _discovered()}
    for name, (arguments, expected) in BAD.items():
        experiment = {
            "title": "t",
            "description": "d",
            "method": [
                {
                    "type": "action",
                    "name": name,
                    "provider": {
                        "type": "python",
                        "module": by_name[name]["mod"],
                        "func": name,
                        "arguments": arguments,
                    },
                }
            ],
        }
        with pytest.raises(ExperimentInvalid, match=r"method\[0\]\.provider\.arguments") as caught:
            validate_experiment(Path("x.json"), experiment)
        assert expected in caught.value.message, (name, caught.value.message)


def test_plain_chaos_run_refuses_query_series_without_a_request(
    listener: CountingListener, ledger_path: Path, tmp_path: Path
) -> None:
    """The issue's case: refused by validate, and no longer sent to Prometheus by `chaos run`."""
    experiment = {
        "title": "query_series with a step longer than its window",
        "description": "must fail before any request",
        "configuration": {"prometheus_url": f"http://127.0.0.1:{listener.port}"},
        "method": [
            {
                "type": "probe",
                "name": "series",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.prometheus.probes",
                    "func": "query_series",
                    "arguments": {"expr": "up", "window_seconds": 60, "step_seconds": 300},
                },
            }
        ],
    }
    path = tmp_path / "experiment.json"
    path.write_text(json.dumps(experiment))
    journal_path = tmp_path / "journal.json"
    subprocess.run(
        [str(CHAOS), "--no-version-check", "run", "--journal-path", str(journal_path), str(path)],
        env=cli_env(ledger_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    journal = json.loads(journal_path.read_text())
    (run,) = journal["run"]
    assert run["status"] == "failed"
    assert "step_seconds=300 is longer than window_seconds=60" in run["exception"][-1]
    assert listener.accepted == 0
