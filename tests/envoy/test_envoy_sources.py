"""The probe end to end from each source: admin URL, file, Kubernetes pod (kmock + exec)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kubernetes import client
from support.envoy_dumps import COMPLIANT, DEFAULTS, AdminServer, gateway_pod
from support.kmock_exec import ExecResult, RunningEmulator

from chaos_ext._core.k8s import api_client
from chaos_ext._core.rbac import Rule, rbac_of
from chaos_ext.envoy._fetch import DumpSource, parse_source
from chaos_ext.envoy.errors import EnvoyError
from chaos_ext.envoy.probes import edge_config_audit
from chaos_ext.errors import InvalidArgument


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("http://127.0.0.1:15000", DumpSource("url", "http://127.0.0.1:15000/config_dump")),
        ("http://gw:15000/config_dump/", DumpSource("url", "http://gw:15000/config_dump")),
        ("https://gw/admin", DumpSource("url", "https://gw/admin/config_dump")),
        ("dumps/gw.json", DumpSource("file", "dumps/gw.json")),
        ("file:///tmp/gw.json", DumpSource("file", "/tmp/gw.json")),
        ("-", DumpSource("stdin", "-")),
        ("pod://istio-system/gw-1", DumpSource("pod", "istio-system/gw-1", "istio-system", "gw-1")),
        (
            "pod://istio-system?selector=istio=ingressgateway&container=proxy",
            DumpSource(
                "pod",
                "istio-system/?selector=istio=ingressgateway",
                "istio-system",
                "",
                "istio=ingressgateway",
                "proxy",
            ),
        ),
    ],
)
def test_parse_source(source: str, expected: DumpSource) -> None:
    assert parse_source(source) == expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("", "empty"),
        ("ftp://gw/dump", "unknown scheme 'ftp'"),
        ("pod://istio-system", "give a pod"),
        ("pod://istio-system/gw-1?selector=app=x", "not both"),
        ("pod://Bad_NS/gw-1", "namespace 'Bad_NS'"),
        ("http://:15000", "has no host"),
    ],
)
def test_bad_sources_are_invalid_arguments(source: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        parse_source(source)


def test_admin_url_is_fetched_over_http(admin_server: AdminServer) -> None:
    admin_server.routes["/config_dump"] = (200, COMPLIANT.read_bytes())
    report = edge_config_audit(source=admin_server.url)
    assert admin_server.requests == ["/config_dump"]
    assert report["passed"] is True and report["summary"]["checks"] == 45
    assert report["source"] == f"{admin_server.url}/config_dump"
    admin_server.routes["/config_dump"] = (200, DEFAULTS.read_bytes())
    report = edge_config_audit(source=admin_server.url + "/", listener="0.0.0.0_8443")
    assert report["passed"] is False and report["listeners"] == ["0.0.0.0_8443"]
    # global: 3 overload rules + the connection cap; 8443: buffer and connection limits;
    # 9 HCM rules on each of its 2 filter chains (the idle timeouts' defaults comply);
    # the route rules pass (the fixture's routes set timeout and idle_timeout 15s)
    assert report["summary"]["failed"] == 4 + 2 + 9 * 2


def test_admin_url_errors(admin_server: AdminServer) -> None:
    with pytest.raises(EnvoyError, match=r"config_dump: HTTP 404 Not Found: 'invalid path'"):
        edge_config_audit(source=admin_server.url)
    admin_server.routes["/config_dump"] = (200, b'{"configs": [')
    with pytest.raises(EnvoyError, match=r"config_dump: not valid JSON \(line 1, column 14"):
        edge_config_audit(source=admin_server.url)
    admin_server.routes["/config_dump"] = (200, COMPLIANT.read_bytes())
    with pytest.raises(EnvoyError, match="no listener named 'nope'"):
        edge_config_audit(source=admin_server.url, listener="nope")


def test_unreachable_admin_url(closed_port: int) -> None:
    with pytest.raises(
        EnvoyError, match=f"cannot reach the Envoy admin at http://127.0.0.1:{closed_port}"
    ):
        edge_config_audit(source=f"http://127.0.0.1:{closed_port}", timeout_seconds=2)


def test_admin_url_that_never_answers_times_out(silent_port: int) -> None:
    started = time.monotonic()
    with pytest.raises(EnvoyError, match=r"no answer within 0.5 s \(ReadTimeout\)"):
        edge_config_audit(source=f"http://127.0.0.1:{silent_port}", timeout_seconds=0.5)
    assert time.monotonic() - started < 5


def test_file_source(tmp_path: Path) -> None:
    assert edge_config_audit(source=str(COMPLIANT))["passed"] is True
    assert edge_config_audit(source=f"file://{DEFAULTS}")["passed"] is False
    with pytest.raises(InvalidArgument, match=r"cannot read .*missing\.json'"):
        edge_config_audit(source=str(tmp_path / "missing.json"))


# Envoy's own edge example (envoyproxy/envoy docs/root/configuration/best_practices/edge.rst
# at 20c559ec, Apache-2.0; see fixtures/upstream/SOURCES.md): fixed_heap 2147483648 bytes
EDGE_EXAMPLE = Path(__file__).parent / "fixtures/upstream/envoy-edge-example-20c559ec.yaml"
HEAP_RULE = "overload-heap-below-memory-limit"


def _heap_checks(report: dict[str, object]) -> list[dict[str, object]]:
    return [c for c in report["results"] if c["rule"] == HEAP_RULE]  # type: ignore[attr-defined,index]


def test_memory_limit_fails_a_heap_the_pod_cannot_hold() -> None:
    # without a limit the rule is not there, and the example passes
    plain = edge_config_audit(source=str(EDGE_EXAMPLE))
    assert plain["passed"] is True and _heap_checks(plain) == []
    # Istio's default gateway: limits.memory 1024Mi = 1073741824 bytes < the example's 2 GiB heap
    small = edge_config_audit(source=str(EDGE_EXAMPLE), memory_limit="1024Mi")
    [check] = _heap_checks(small)
    assert check["status"] == "fail" and small["passed"] is False
    assert check["found"] == 2147483648
    assert check["expected"] == "< 1073741824"
    assert str(check["path"]).endswith("max_heap_size_bytes")
    # a container of 4 GiB holds the 2 GiB heap
    large = edge_config_audit(source=str(EDGE_EXAMPLE), memory_limit="4Gi")
    [check] = _heap_checks(large)
    assert check["status"] == "pass" and large["passed"] is True
    # exactly the heap is not below it: fails
    equal = edge_config_audit(source=str(EDGE_EXAMPLE), memory_limit="2147483648")
    assert _heap_checks(equal)[0]["status"] == "fail"


def test_probe_arguments_are_checked_before_anything_is_fetched(admin_server: AdminServer) -> None:
    with pytest.raises(InvalidArgument, match="timeout_seconds"):
        edge_config_audit(source=admin_server.url, timeout_seconds=0)
    with pytest.raises(InvalidArgument, match="is not a listener name"):
        edge_config_audit(source=admin_server.url, listener="0.0.0.0_8443\n")
    with pytest.raises(InvalidArgument, match="rule x"):
        edge_config_audit(source=admin_server.url, rules=[{"id": "x", "at": "hcm:a"}])
    with pytest.raises(InvalidArgument, match="memory_limit: '1 GB' is not a Kubernetes quantity"):
        edge_config_audit(source=admin_server.url, memory_limit="1 GB")
    with pytest.raises(InvalidArgument, match="memory_limit: expected str"):
        edge_config_audit(source=admin_server.url, memory_limit=1024)  # type: ignore[arg-type]
    assert admin_server.requests == []


def test_rbac_is_declared_for_the_pod_source() -> None:
    assert rbac_of(edge_config_audit) == (
        Rule("", "pods", ("get", "list")),
        Rule("", "pods/exec", ("create", "get")),
    )


def _create_pod(name: str, **kwargs: object) -> None:
    core = client.CoreV1Api(api_client())
    core.create_namespaced_pod("istio-system", gateway_pod(name, **kwargs))  # type: ignore[arg-type]


def test_pod_source_execs_pilot_agent_through_the_api(k8s_api: RunningEmulator) -> None:
    _create_pod("istio-ingressgateway-7f8c9d6b5-k2x9p")
    k8s_api.script(
        "istio-system",
        "istio-ingressgateway-7f8c9d6b5-k2x9p",
        ExecResult(stdout=COMPLIANT.read_bytes()),
    )
    report = edge_config_audit(source="pod://istio-system/istio-ingressgateway-7f8c9d6b5-k2x9p")
    assert report["passed"] is True
    assert report["source"] == "pod://istio-system/istio-ingressgateway-7f8c9d6b5-k2x9p"
    (call,) = k8s_api.exec_calls
    assert call.container == "istio-proxy"
    assert call.command == ["pilot-agent", "request", "GET", "config_dump"]


def test_pod_source_by_label_selector_picks_the_first_running_pod(k8s_api: RunningEmulator) -> None:
    _create_pod("gw-b")
    _create_pod("gw-a", phase="Pending")
    _create_pod("gw-c")
    k8s_api.script("istio-system", "gw-b", ExecResult(stdout=DEFAULTS.read_bytes()))
    report = edge_config_audit(source="pod://istio-system?selector=istio=ingressgateway")
    assert report["passed"] is False and report["source"] == "pod://istio-system/gw-b"
    assert [c.pod for c in k8s_api.exec_calls] == ["gw-b"]


def test_pod_source_errors(k8s_api: RunningEmulator) -> None:
    with pytest.raises(EnvoyError, match="read pod istio-system/gw-x: HTTP 404"):
        edge_config_audit(source="pod://istio-system/gw-x")
    # kmock does not filter lists by label selector (kube-apiserver does): the
    # selector is passed through; here the only matching pod is not running yet.
    _create_pod("gw-0", phase="Pending")
    with pytest.raises(
        EnvoyError, match="no running pod in istio-system matches selector 'istio=ingre"
    ):
        edge_config_audit(source="pod://istio-system?selector=istio=ingressgateway")
    _create_pod("gw-1", containers=("envoy",))
    with pytest.raises(EnvoyError, match=r"has no container 'istio-proxy' \(it has envoy\)"):
        edge_config_audit(source="pod://istio-system/gw-1")
    _create_pod("gw-2")
    k8s_api.script(
        "istio-system", "gw-2", ExecResult(stderr=b"exec: pilot-agent: not found\n", exit_code=127)
    )
    with pytest.raises(EnvoyError, match="exit status 127; stderr: exec: pilot-agent: not found"):
        edge_config_audit(source="pod://istio-system/gw-2")


def test_pod_exec_that_hangs_hits_the_deadline(k8s_api: RunningEmulator) -> None:
    _create_pod("gw-1")
    k8s_api.script("istio-system", "gw-1", ExecResult(hang=True))
    started = time.monotonic()
    with pytest.raises(EnvoyError, match="exec config_dump: reading the output failed"):
        edge_config_audit(source="pod://istio-system/gw-1", timeout_seconds=1)
    assert time.monotonic() - started < 6


def test_pod_source_without_kubernetes_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    with pytest.raises(EnvoyError, match="pod source: no usable Kubernetes configuration"):
        edge_config_audit(source="pod://istio-system/gw-1")
