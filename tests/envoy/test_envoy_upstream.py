"""Real upstream configurations (tests/envoy/fixtures/upstream/SOURCES.md: source, commit,
licence of each): Envoy's own edge example, Istio's generated bootstraps, Istio test-data
dumps of gateways and sidecars in older shapes."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chaos_ext.envoy.errors import EnvoyError
from chaos_ext.envoy.probes import edge_config_audit

UPSTREAM = Path(__file__).parent / "fixtures" / "upstream"
ENVOY_EXAMPLES = ["envoy-edge-example-02a45cb9.yaml", "envoy-edge-example-20c559ec.yaml"]
Gameday = Callable[..., subprocess.CompletedProcess[str]]


def _audit(name: str, **kwargs: Any) -> dict[str, Any]:
    return edge_config_audit(source=str(UPSTREAM / name), **kwargs)


def _rows(report: dict[str, Any], rule: str) -> list[dict[str, Any]]:
    return [row for row in report["results"] if row["rule"] == rule]


@pytest.mark.parametrize("example", ENVOY_EXAMPLES)
def test_envoys_published_edge_example_passes_envoy_edge(gameday: Gameday, example: str) -> None:
    result = gameday(
        "audit", "envoy", "--source", str(UPSTREAM / example), "--profile", "envoy-edge"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Envoy bootstrap (YAML), edge, profile envoy-edge" in " ".join(result.stdout.split())
    assert "FAIL" not in result.stdout and "UNREADABLE" not in result.stdout
    assert "21 checks of 21 rules on (unnamed 0.0.0.0:443): 20 passed, 0 failed, 1 warnings" in (
        result.stdout
    )
    report = _audit(example)
    assert report["passed"] is True
    assert report["input"]["kind"] == "bootstrap" and report["proxy"]["role"] == "edge"


def test_the_examples_unnamed_listener_is_its_own_finding_with_the_fix() -> None:
    (row,) = _rows(_audit(ENVOY_EXAMPLES[0]), "listener-connection-limit")
    assert row["status"] == "warn" and row["pass"] is True
    assert row["listener"] == "(unnamed 0.0.0.0:443)"
    assert row["path"] == "bootstrap.static_resources.listeners[0].name"
    assert "the listener has no name: Envoy gives it a generated one" in row["note"]
    assert (
        "the runtime sets envoy.resource_limits.listener.example_listener_name.connection_limit"
        ", but no listener is named 'example_listener_name': name this listener "
        "'example_listener_name'"
    ) in row["note"]
    hardened = _audit(ENVOY_EXAMPLES[0], profile="hardened")
    (strict,) = _rows(hardened, "listener-connection-limit")
    assert strict["status"] == "fail"  # hardened does not accept a listener without a limit
    assert hardened["summary"]["failed_rules"] == [
        "listener-connection-limit",
        "max-connection-duration",
        "overload-disable-http-keepalive",
        "overload-reduce-timeouts",
        "overload-tcp-listener-accept",
        "request-headers-timeout",
    ]


def test_envoys_v2_era_example_is_read_in_its_older_shapes() -> None:
    report = _audit("envoy-edge-example-v2-03a59e29.yaml")
    (heap,) = _rows(report, "overload-fixed-heap")  # fixed_heap settings in `config:`
    assert (heap["status"], heap["found"]) == ("pass", 2147483648)
    assert heap["path"].endswith(".resource_monitors[0].config.max_heap_size_bytes")
    (streams,) = _rows(report, "http2-max-concurrent-streams")  # the v2 HCM @type
    assert (streams["status"], streams["found"]) == ("pass", 100)
    (clusters,) = _rows(report, "cluster-buffer-limit")  # `clusters:` written as one object
    assert clusters["status"] == "unreadable" and clusters["path"] == (
        "bootstrap.static_resources.clusters"
    )
    assert "'clusters' is an object, not a list of clusters" in clusters["note"]
    # the 1.12-era page did not yet show path normalisation or the underscores action
    assert report["summary"]["failed_rules"] == [
        "cluster-buffer-limit",
        "escaped-slashes",
        "headers-with-underscores",
        "merge-slashes",
        "normalize-path",
    ]


@pytest.mark.parametrize(
    ("name", "path"),
    [
        (
            "istio-bootstrap-default-golden.json",
            "bootstrap.overload_manager.resource_monitors[0].typed_config"
            ".max_active_downstream_connections",
        ),
        (
            "istio-bootstrap-default-golden-runtime-key.json",
            'bootstrap.layered_runtime.layers[0].static_layer["overload.global_downstream_max_connections"]',
        ),
    ],
)
def test_istio_generated_bootstrap_fails_the_connection_cap(
    gameday: Gameday, name: str, path: str
) -> None:
    report = _audit(name, role="gateway")  # the goldens carry a sidecar node id
    assert report["input"]["description"] == "Envoy bootstrap (JSON)"
    (cap,) = _rows(report, "global-downstream-max-connections")
    assert cap["status"] == "fail" and int(cap["found"]) == 2147483647 and cap["path"] == path
    assert (
        "listeners come from LDS: listener rules need the live /config_dump"
        in (report["input"]["notes"])
    )
    assert {row["status"] for row in report["results"] if row["listener"] == "(from LDS)"} == {
        "not-in-input"
    }
    sidecar = _audit(name, profile="sidecar")  # as what it is: a sidecar's bootstrap
    (cap,) = _rows(sidecar, "global-downstream-max-connections")
    assert cap["status"] == "fail" and int(cap["found"]) == 2147483647
    result = gameday("audit", "envoy", "--source", str(UPSTREAM / name), "--role", "gateway")
    assert result.returncode == 1 and "2147483647" in result.stdout


def test_istio_gateway_dump_with_unnamed_entries_and_explicit_zero_timeout() -> None:
    report = _audit("istio-ingressgateway-config_dump.json")
    assert report["proxy"]["role"] == "gateway" and report["listeners"] == ["0.0.0.0_80"]
    (idle,) = _rows(report, "stream-idle-timeout")
    assert (idle["status"], idle["found"]) == ("fail", "0s")  # set by Istio, not Envoy's 300s
    assert idle["path"] == (
        "configs[2].dynamic_listeners[0].active_state.listener"
        ".filter_chains[0].filters[0].typed_config.stream_idle_timeout"
    )
    (remote,) = _rows(report, "use-remote-address")
    assert (remote["status"], remote["found"]) == ("pass", True)
    (clusters,) = _rows(report, "cluster-buffer-limit")
    assert clusters["listener"] == "122 clusters" and clusters["detail"]["failed"] == 122


@pytest.mark.parametrize(
    ("name", "listener"),
    [
        ("istio-sidecar-productpage-config_dump.json", "0.0.0.0_9080"),
        ("istio-sidecar-details-camelcase-config_dump.json", "0.0.0.0_8080"),
    ],
)
def test_older_config_form_hcm_values_are_shown_never_called_absent(
    name: str, listener: str
) -> None:
    report = _audit(name, role="gateway", listener=listener)
    (remote,) = _rows(report, "use-remote-address")
    assert (remote["status"], remote["found"]) == ("fail", False)
    assert remote["path"].endswith(".filter_chains[0].filters[0].config.use_remote_address")
    if "productpage" in name:
        (idle,) = _rows(report, "stream-idle-timeout")
        assert (idle["status"], idle["found"]) == ("fail", "0s")
    else:
        assert (
            "lowerCamelCase field names (jsonpb output) read as proto field names"
            in (report["input"]["notes"])
        )


def test_a_sidecar_dump_is_recognised_and_not_failed_on_edge_rules(gameday: Gameday) -> None:
    source = str(UPSTREAM / "istio-sidecar-productpage-config_dump.json")
    with pytest.raises(
        EnvoyError,
        match=r"this is an Istio sidecar \(configs\[0\].bootstrap"
        r".node.id = 'sidecar~10.52.2.21~productpage.*"
        r"audit its inbound listeners with --profile sidecar",
    ):
        edge_config_audit(source=source)
    result = gameday("audit", "envoy", "--source", source)
    assert result.returncode == 3 and "--profile sidecar" in result.stderr
    report = edge_config_audit(source=source, profile="sidecar")
    assert report["listeners"] == ["10.52.2.21_9080"]  # Istio < 1.6: bound to the pod IP
    (path,) = _rows(report, "inbound-normalize-path")
    assert path["status"] == "fail" and path["found"] == "absent"
    assert path["path"].endswith(".filter_chains[0].filters[0].config.normalize_path")


def test_stdin_source_reads_a_bootstrap(gameday: Gameday) -> None:
    text = (UPSTREAM / ENVOY_EXAMPLES[0]).read_text()
    result = gameday("audit", "envoy", "--source", "-", "--json", input=text)
    assert result.returncode == 0, result.stderr
    assert '"source": "stdin"' in result.stdout


def test_a_waypoint_is_recognised_too(gameday: Gameday) -> None:
    source = str(UPSTREAM / "istio-waypoint-config_dump.json")
    result = gameday("audit", "envoy", "--source", source)
    assert result.returncode == 3
    assert "this is an Istio waypoint" in " ".join(result.stderr.split())
    report = edge_config_audit(source=source, role="gateway")  # when one does serve the edge
    assert report["proxy"]["evidence"].startswith("given as --role gateway (detected: waypoint")
    assert report["listeners"] == ["main_internal"]
