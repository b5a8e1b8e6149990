"""`chaos discover chaos_ext` lists every activity with its kind and real argument types."""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.harness import cli_env, gameday_argv

from chaos_ext import activity_modules, discover

CHAOS = Path(sys.executable).with_name("chaos")

# What `chaos discover` must say for each activity: "argument:type ... -> return type",
# written from the signatures (configuration/secrets, always mapping, are left out here).
EXPECTED = {
    "db.actions.exhaust_connections": (
        "engine:string host:string port:integer database:string user:string target:string "
        "hold_seconds:number open_concurrency:integer keepalive_seconds:number "
        "connect_timeout_seconds:number refill_seconds:number -> mapping"
    ),
    "db.actions.release_connections": (
        "engine:string host:string port:integer include_dead_runs:boolean -> mapping"
    ),
    "db.probes.connection_headroom": (
        "engine:string host:string port:integer database:string user:string "
        "connect_timeout_seconds:number -> integer"
    ),
    "db.probes.http_readiness": (
        "url:string timeout_seconds:number expect_status:integer -> boolean"
    ),
    "dns.actions.flood_dns": (
        "server:string names:list port:integer qps:number duration_seconds:number "
        "protocol:string search_domains:list ndots:integer qtype:string timeout_seconds:number "
        "concurrency:integer max_queries:integer sockets:integer workers:integer -> mapping"
    ),
    "dns.actions.inject_dns_errors": (
        "patterns:list error:string target:string resolvers:list percent:integer "
        "duration_seconds:number port:integer -> mapping"
    ),
    "dns.actions.limit_dns_rate": (
        "pps:integer burst:integer resolvers:list port:integer duration_seconds:number "
        "target:string -> mapping"
    ),
    "dns.actions.release_dnsmasq_tcp": (
        "server:string port:integer include_dead_runs:boolean -> mapping"
    ),
    "dns.actions.remove_dns_errors": "target:string include_dead_runs:boolean -> mapping",
    "dns.actions.remove_dns_rate_limit": "target:string include_dead_runs:boolean -> mapping",
    "dns.actions.saturate_dnsmasq_tcp": (
        "server:string port:integer connections:integer hold_seconds:number query_name:string "
        "connect_timeout_seconds:number -> mapping"
    ),
    "dns.actions.stop_dns_flood": "server:string port:integer include_dead_runs:boolean -> mapping",
    "dns.probes.dns_rate_limit_drops": "target:string -> mapping",
    "dns.probes.dns_rate_limit_supported": "target:string -> mapping",
    "dns.probes.dns_resolution_stats": (
        "server:string name:string port:integer protocol:string samples:integer "
        "timeout_seconds:number qtype:string interval_seconds:number -> mapping"
    ),
    "dns.probes.dnsmasq_child_processes": "pid:integer pidfile:string port:integer -> mapping",
    "envoy.probes.edge_config_audit": (
        "source:string listener:string rules:list rules_file:string timeout_seconds:number "
        "profile:string role:string memory_limit:string -> mapping"
    ),
    "envoy.probes.overload_state": "job:string selector:mapping -> mapping",
    "faults.actions.rollback_faults": "include_dead_runs:boolean -> mapping",
    "faults.probes.open_faults": "kind:string -> integer",
    "load.actions.drive_http_load": (
        "urls:string rate:number duration_seconds:number ramp:mapping steps:list "
        "concurrency_limit:integer method:string headers:mapping body:string http2:boolean "
        "timeout_seconds:number max_rate:number max_duration_seconds:number processes:integer "
        "metrics_port:integer metrics_addr:string name:string ca_file:string "
        "cause_header:string wait:boolean replicas:integer kubernetes:mapping -> mapping"
    ),
    "load.actions.stop_http_load": (
        "name:string ledger_id:string include_buckets:boolean include_dead_runs:boolean -> mapping"
    ),
    "load.probes.error_onset": (
        "name:string ledger_id:string classes:mapping min_errors:integer "
        "max_error_ratio:number max_p95_seconds:number window_seconds:number -> mapping"
    ),
    "load.probes.load_window_stats": (
        "name:string ledger_id:string fault_kind:string fault_target:string from_seconds:number "
        "to_seconds:number baseline_urls:list baseline_rate:number baseline_seconds:number "
        "include_buckets:boolean -> mapping"
    ),
    "network.actions.add_latency": (
        "interface:string delay_seconds:number destinations:list ports:list "
        "jitter_seconds:number correlation:number loss:number duration_seconds:number "
        "target:string -> mapping"
    ),
    "network.actions.remove_latency": (
        "interface:string target:string include_dead_runs:boolean -> mapping"
    ),
    "network.probes.latency_supported": "interface:string target:string -> mapping",
    "network.probes.measure_rtt": (
        "host:string port:integer samples:integer timeout_seconds:number netns:string -> mapping"
    ),
    "network.probes.qdisc_state": "interface:string target:string -> mapping",
    "node.actions.drain_nodes": (
        "label_selector:string count:integer percent:number max_fraction:number "
        "protected_namespaces:list pick:string delete_emptydir_data:boolean force:boolean "
        "timeout_seconds:number parallel:integer backoff_initial_seconds:number "
        "backoff_max_seconds:number wait_for_deletion:boolean grace_period_seconds:integer "
        "uncordon_after_seconds:number -> mapping"
    ),
    "node.actions.uncordon_drained_nodes": "include_dead_runs:boolean -> mapping",
    "node.probes.deployment_ready_ratio": (
        "name:string namespace:string wait_seconds:number -> number"
    ),
    "node.probes.hpa_replicas": "name:string namespace:string wait_seconds:number -> mapping",
    "node.probes.nodes_ready": "label_selector:string wait_seconds:number -> mapping",
    "node.probes.pods_pending": (
        "namespace:string label_selector:string min_age_seconds:number -> mapping"
    ),
    "prometheus.probes.alerts_quiet": (
        "rules:list select:list firing:list include_pending:boolean -> boolean"
    ),
    "prometheus.probes.catalog_check": (
        "name:string parameters:mapping window_seconds:number step_seconds:number "
        "min_fraction:number -> boolean"
    ),
    "prometheus.probes.catalog_probe": "name:string parameters:mapping -> number",
    "prometheus.probes.histogram_quantile": (
        "metric:string quantile:number window_seconds:number selector:mapping if_empty:number "
        "-> number"
    ),
    "prometheus.probes.query_series": (
        "expr:string window_seconds:number step_seconds:number -> mapping"
    ),
    "prometheus.probes.query_stats": (
        "expr:string window_seconds:number step_seconds:number -> mapping"
    ),
    "prometheus.probes.query_value": (
        "expr:string aggregate:string if_empty:number if_nan:number -> number"
    ),
    "prometheus.probes.slo_fraction": (
        "expr:string op:string threshold:number window_seconds:number step_seconds:number -> number"
    ),
    "prometheus.probes.slo_holds": (
        "expr:string op:string threshold:number window_seconds:number step_seconds:number "
        "min_fraction:number -> boolean"
    ),
    "sidecar.actions.change_sidecar_template": (
        "values_patch:mapping data:mapping configmap_name:string configmap_namespace:string "
        "values_key:string -> mapping"
    ),
    "sidecar.actions.restore_sidecar_template": (
        "configmap_name:string configmap_namespace:string include_dead_runs:boolean -> mapping"
    ),
    "sidecar.actions.rollout_drifted_workloads": (
        "container_name:string configmap_name:string configmap_namespace:string "
        "template_format:string values_key:string config_key:string include_namespaces:list "
        "exclude_namespaces:list label_selector:string started_before:string "
        "max_workloads:integer include_daemonsets:boolean parallel:integer dry_run:boolean "
        "wait:boolean timeout_seconds:number annotation_prefix:string reason:string -> mapping"
    ),
    "sidecar.probes.sidecar_drift": (
        "container_name:string configmap_name:string configmap_namespace:string "
        "template_format:string values_key:string config_key:string include_namespaces:list "
        "exclude_namespaces:list label_selector:string started_before:string "
        "max_workloads:integer -> mapping"
    ),
}


def _described(activity: dict[str, object]) -> str:
    arguments = activity["arguments"]
    assert isinstance(arguments, list)
    shown = " ".join(
        f"{a['name']}:{a.get('type')}"
        for a in arguments
        if a["name"] not in ("configuration", "secrets")
    )
    return f"{shown} -> {activity.get('return_type')}"


def test_every_argument_has_its_real_type() -> None:
    found = {
        f"{a['mod'].removeprefix('chaos_ext.')}.{a['name']}": a for a in discover()["activities"]
    }
    assert set(found) == set(EXPECTED), "activities added or removed: update EXPECTED"
    for name, activity in found.items():
        assert _described(activity) == EXPECTED[name], name
        for argument in activity["arguments"]:
            if argument["name"] in ("configuration", "secrets"):
                assert argument["type"] == "mapping", (name, argument)


def test_every_activity_has_the_type_of_its_module() -> None:
    found = discover()["activities"]
    assert found, "no activities discovered"
    by_name = {(a["mod"], a["name"]): a for a in found}
    for module_name, kind in activity_modules():
        module = importlib.import_module(module_name)
        for name in module.__all__:
            activity = by_name[(module_name, name)]
            assert activity["type"] == kind, f"{module_name}.{name} is listed as {activity['type']}"
            expected = "action" if module_name.endswith(".actions") else "probe"
            assert activity["type"] == expected
            doc = (activity["doc"] or "").strip().splitlines()
            assert doc and len(doc[0]) > 15, f"{module_name}.{name} needs a one-line doc"
    assert len(by_name) == len(found), "an activity is listed twice"


def test_all_is_exactly_the_public_functions() -> None:
    for module_name, _ in activity_modules():
        module = importlib.import_module(module_name)
        public = {
            name
            for name, obj in vars(module).items()
            if inspect.isfunction(obj)
            and obj.__module__ == module.__name__
            and not name.startswith("_")
        }
        assert set(module.__all__) == public, module_name


def test_activity_signatures_are_json_friendly_with_injected_last() -> None:
    for activity in discover()["activities"]:
        names = [a["name"] for a in activity["arguments"]]
        injected = [n for n in names if n in ("configuration", "secrets")]
        assert names[len(names) - len(injected) :] == injected, activity["name"]
        for argument in activity["arguments"]:
            assert argument.get("type") in {
                "string",
                "integer",
                "number",
                "boolean",
                "list",
                "mapping",
            }, (activity["name"], argument)


def _chaos_discover(tmp_path: Path) -> Path:
    out = tmp_path / "discovery.json"
    result = subprocess.run(
        [
            str(CHAOS),
            "discover",
            "--no-install",
            "--no-system-info",
            "--discovery-path",
            str(out),
            "chaos_ext",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return out


def test_chaos_discover_cli_shows_no_object_type(tmp_path: Path) -> None:
    listed = json.loads(_chaos_discover(tmp_path).read_text())["activities"]
    assert {(a["name"], a["type"]) for a in listed} >= {
        ("rollback_faults", "action"),
        ("open_faults", "probe"),
    }
    untyped = [
        (a["name"], arg["name"])
        for a in listed
        for arg in a["arguments"]
        if arg.get("type") in (None, "object")
    ]
    assert untyped == []
    assert all(a.get("return_type") not in (None, "object") for a in listed)


def _index(activities: list[dict[str, object]], name: str) -> str:
    return str([a["name"] for a in activities].index(name) + 1)


@pytest.mark.slow
def test_chaos_init_from_the_discovery_builds_a_valid_experiment(tmp_path: Path) -> None:
    """Chaos Toolkit's own wizard turns typed answers into typed arguments that validate."""
    discovery = _chaos_discover(tmp_path)
    activities = json.loads(discovery.read_text())["activities"]
    probes = [a for a in activities if a["type"] == "probe"]
    answers = [
        "typed from discovery",
        "y",
        "no open fault",
        # hypothesis: open_faults(kind) with tolerance 0
        _index(probes, "open_faults"),
        "y",
        "0",
        "",
        "n",
        "y",  # a method: measure_rtt(host, port, samples, timeout_seconds, netns), rollback_faults
        _index(activities, "measure_rtt"),
        "y",
        "127.0.0.1",
        "9",
        "3",
        "0.5",
        "",
        "y",
        _index(activities, "rollback_faults"),
        "y",
        "false",
        "n",
        "n",  # no rollbacks
    ]
    experiment = tmp_path / "experiment.json"
    init = subprocess.run(
        [
            str(CHAOS),
            "--settings",
            str(tmp_path / "settings.yaml"),
            "init",
            "--discovery-path",
            str(discovery),
            "--experiment-path",
            str(experiment),
        ],
        input="\n".join(answers) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert init.returncode == 0, init.stdout[-2000:] + init.stderr[-2000:]
    built = json.loads(experiment.read_text())
    rtt, rollback = built["method"]
    assert rtt["provider"]["arguments"] == {
        "host": "127.0.0.1",
        "port": 9,
        "samples": 3,
        "timeout_seconds": 0.5,
        "netns": "",
    }  # fmt: skip  (integers and floats, not the strings typed)
    assert rollback["provider"]["arguments"] == {"include_dead_runs": False}
    checked = subprocess.run(
        [str(CHAOS), "--settings", str(tmp_path / "settings.yaml"), "validate", str(experiment)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    ours = subprocess.run(
        gameday_argv("validate", str(experiment)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        env=cli_env(tmp_path / "ledger.sqlite3"),
    )
    assert ours.returncode == 0, ours.stdout + ours.stderr


def test_every_declared_fault_kind_is_discovered_with_its_rollback() -> None:
    """From the registry, not a list: each kind's fault actions and its rollback are listed
    by ``chaos discover`` as actions of the kind's module, every argument typed."""
    from chaos_ext._core.ledger import FAULT_KINDS  # noqa: PLC0415

    FAULT_KINDS.load_all()
    found = {(a["mod"], a["name"]): a for a in discover()["activities"]}
    kinds = [k for k in FAULT_KINDS.declared() if k.actions]
    assert kinds, "no fault kind declares an action"
    for kind in kinds:
        for name in (*kind.actions, *([kind.rollback] if kind.rollback else [])):
            activity = found.get((kind.module, name))
            assert activity is not None, f"{kind.name}: {kind.module}.{name} is not discovered"
            assert activity["type"] == "action", (kind.name, name)
            assert all(a.get("type") not in (None, "object") for a in activity["arguments"])
