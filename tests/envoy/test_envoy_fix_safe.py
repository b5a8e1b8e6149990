"""``--fix`` is safe to apply to a real mesh: sized from the pod, merged, selected, all real.

Inputs are Istio's own (Apache-2.0, source and commit in fixtures/upstream/SOURCES.md):
the Istio 1.3 ingress gateway ``/config_dump`` and the ``istio-ingressgateway``
Deployment of Istio's operator golden (``limits.memory: 1024Mi``, pods not
injected, labels ``istio: ingressgateway``). Variants are made in memory from
them (an existing ``proxy.istio.io/config``, an existing custom bootstrap, an
EnvoyFilter) and written to the test's directory. The Gateway API labels are
the ones Istio's kube-gateway template sets on a gateway's pods
(istio/istio ``manifests/charts/istio-control/istio-discovery/files/kube-gateway.yaml``
at 03404d0fbc82b9f3d5a19e516ab4c1a9ed87909d, Apache-2.0: ``gateway.networking.k8s.io/gateway-name``,
``gateway.networking.k8s.io/gateway-class-name``, ``sidecar.istio.io/inject: "false"``;
the template has no ``bootstrapOverride`` or ``ISTIO_BOOTSTRAP_OVERRIDE``).

The heap headroom: Envoy's edge page gives none against a container limit;
Envoy Gateway sizes the heap at 80 % of it (gateway.envoyproxy.io, "Overload
Manager", Apache-2.0 docs), which is what the fix writes.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.envoy_dumps import COMPLIANT, DEFAULTS
from support.kube_api import KubeApi

from chaos_ext.envoy._apply import with_envoyfilter, with_overlay, with_runtime_values
from chaos_ext.envoy._input import decode
from chaos_ext.envoy._pipeline import audit_decoded
from chaos_ext.envoy._profiles import effective_rules

UPSTREAM = Path(__file__).parent / "fixtures" / "upstream"
GATEWAY_1_3 = UPSTREAM / "istio-ingressgateway-config_dump.json"
DEPLOYMENT = UPSTREAM / "istio-ingressgateway-deployment.yaml"
EXAMPLE = UPSTREAM / "envoy-edge-example-02a45cb9.yaml"  # fixed_heap 2 GiB
LIMIT = 1024 * 2**20  # the Deployment's limits.memory: 1024Mi
HEAP = int(LIMIT * 0.8)
FIXED_HEAP = "envoy.resource_monitors.fixed_heap"
CAP = "overload.global_downstream_max_connections"
Gameday = Callable[..., subprocess.CompletedProcess[str]]


def _run(
    gameday: Gameday, source: Path, out: Path, *extra: str, kind: str = "istio", code: int = 1
) -> str:
    result = gameday(
        "audit", "envoy", "--source", str(source), "--fix", kind, "-o", str(out), *extra
    )
    assert result.returncode == code, result.stdout + result.stderr
    return " ".join(result.stderr.split())


def _deployment(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(DEPLOYMENT.read_text())
    template = doc["spec"]["template"]
    for key, value in changes.items():
        if key == "annotations":
            template["metadata"]["annotations"].update(value)
        elif key == "labels":
            template["metadata"]["labels"].update(value)
    return doc


def _proxy(doc: dict[str, Any]) -> dict[str, Any]:
    (proxy,) = [
        c for c in doc["spec"]["template"]["spec"]["containers"] if c["name"] == "istio-proxy"
    ]
    return proxy  # type: ignore[no-any-return]


def _write(path: Path, *docs: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump_all(docs))
    return path


def _overlay(out: Path) -> dict[str, Any]:
    configmap = yaml.safe_load((out / "custom-bootstrap-configmap.yaml").read_text())
    return json.loads(configmap["data"]["custom_bootstrap.json"])  # type: ignore[no-any-return]


def _monitors(overlay: dict[str, Any]) -> dict[str, Any]:
    return {m["name"]: m for m in overlay.get("overload_manager", {}).get("resource_monitors", [])}


def _kubectl(api: KubeApi | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(api.kubeconfig) if api else "/nonexistent"}
    return subprocess.run(
        ["kubectl", *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )


def _patched(deployment: Path, patch: Path) -> dict[str, Any]:
    done = _kubectl(
        None,
        "patch",
        "--local",
        "-f",
        str(deployment),
        "--type",
        "strategic",
        "--patch-file",
        str(patch),
        "-o",
        "json",
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _audit(decoded: Any, *, limit: int | None = None) -> dict[str, Any]:
    from chaos_ext.envoy.audit import heap_rule  # noqa: PLC0415

    chosen, rules = effective_rules("envoy-edge", None, "")
    extra = [heap_rule(limit, "test")] if limit else []
    return audit_decoded(decoded, origin="t", profile=chosen, rules=[*rules, *extra]).report


# --- 1. the heap, sized from the pod -----------------------------------------------


def test_heap_is_sized_below_the_deployments_memory_limit(gameday: Gameday, tmp_path: Path) -> None:
    err = _run(gameday, GATEWAY_1_3, tmp_path / "a", "--existing", str(DEPLOYMENT))
    heap = _monitors(_overlay(tmp_path / "a"))[FIXED_HEAP]["typed_config"]["max_heap_size_bytes"]
    assert heap == HEAP == 858993459 and heap < LIMIT
    assert f"heap limit {HEAP} bytes: 80% of the container's memory limit {LIMIT} bytes" in err
    assert "resources.limits.memory = 1024Mi" in err
    actions = {
        a["name"]: a["triggers"][0]["threshold"]["value"]
        for a in _overlay(tmp_path / "a")["overload_manager"]["actions"]
    }
    assert actions["envoy.overload_actions.stop_accepting_requests"] * heap < LIMIT
    # --memory-limit gives the same heap (and overrides the Deployment's)
    _run(gameday, GATEWAY_1_3, tmp_path / "b", "--memory-limit", "1Gi", code=2)
    assert _overlay(tmp_path / "b") == _overlay(tmp_path / "a")
    _run(
        gameday,
        GATEWAY_1_3,
        tmp_path / "c",
        "--existing",
        str(DEPLOYMENT),
        "--memory-limit",
        "512Mi",
    )
    assert _monitors(_overlay(tmp_path / "c"))[FIXED_HEAP]["typed_config"][
        "max_heap_size_bytes"
    ] == int(512 * 2**20 * 0.8)


def test_without_a_memory_limit_no_heap_is_written_and_the_reason_is_given(
    gameday: Gameday, tmp_path: Path
) -> None:
    err = _run(gameday, GATEWAY_1_3, tmp_path / "a", code=2)
    overlay = _overlay(tmp_path / "a")
    assert "overload_manager" not in overlay  # no monitor, and no action triggered on one
    assert "no heap limit written: the container's memory limit is not known" in err
    readme = (tmp_path / "a" / "README.md").read_text()
    assert "## Not done, or to check first" in readme and "no heap limit written" in readme
    assert "overload-fixed-heap" not in readme.split("## Files")[0]  # not claimed as fixed
    # a Deployment without a limit: the same, and the reason names the field
    doc = _deployment()
    del _proxy(doc)["resources"]["limits"]["memory"]
    err = _run(
        gameday,
        GATEWAY_1_3,
        tmp_path / "b",
        "--existing",
        str(_write(tmp_path / "d.yaml", doc)),
        code=2,
    )
    assert "container istio-proxy resources.limits.memory: not set" in err
    assert "overload_manager" not in _overlay(tmp_path / "b")


def test_the_audit_fails_a_heap_at_or_above_the_memory_limit(
    gameday: Gameday, tmp_path: Path
) -> None:
    def rows(*extra: str) -> tuple[int, dict[str, str]]:
        result = gameday("audit", "envoy", "--source", str(EXAMPLE), "--json", *extra)
        report = json.loads(result.stdout)
        return result.returncode, {r["rule"]: r["status"] for r in report["results"]}

    code, status = rows()
    assert code == 0 and "overload-heap-below-memory-limit" not in status  # limit unknown
    code, status = rows("--memory-limit", "1024Mi")  # the example's 2 GiB heap in 1 GiB
    assert code == 1 and status["overload-heap-below-memory-limit"] == "fail"
    code, status = rows("--memory-limit", "2Gi")  # at the limit: still fails
    assert code == 1 and status["overload-heap-below-memory-limit"] == "fail"
    code, status = rows("--memory-limit", "4Gi")
    assert code == 0 and status["overload-heap-below-memory-limit"] == "pass"
    result = gameday("audit", "envoy", "--source", str(EXAMPLE), "--memory-limit", "lots")
    assert result.returncode == 3 and "'lots' is not a Kubernetes quantity" in result.stderr
    # --fix envoy: the overlay cannot change the example's monitor; the patched bootstrap does
    err = _run(gameday, EXAMPLE, tmp_path, "--memory-limit", "1024Mi", kind="envoy")
    assert (
        "Envoy would refuse a second overload_manager.resource_monitors[?name = "
        "'envoy.resource_monitors.fixed_heap']" in err
    )
    patched = yaml.safe_load((tmp_path / "envoy-bootstrap.patched.yaml").read_text())
    assert _monitors(patched)[FIXED_HEAP]["typed_config"]["max_heap_size_bytes"] == HEAP
    assert _audit(decode(yaml.safe_dump(patched), origin="p"), limit=LIMIT)["passed"] is True


# --- 2. merge, never overwrite -------------------------------------------------------


def test_an_existing_proxy_config_keeps_its_keys(gameday: Gameday, tmp_path: Path) -> None:
    """The merge-back test: a gateway with its own settings keeps them after the fix."""
    own = {
        "gatewayTopology": {"numTrustedProxies": 2},
        "runtimeValues": {"re2.max_program_size.error_level": "1000"},
    }
    deployment = _write(
        tmp_path / "deploy.yaml",
        _deployment(annotations={"proxy.istio.io/config": json.dumps(own)}),
    )
    out = tmp_path / "fix"
    err = _run(gameday, GATEWAY_1_3, out, "--existing", str(deployment))
    assert "conflict" not in err
    doc = _patched(deployment, out / "gateway-deployment-patch.yaml")
    config = json.loads(doc["spec"]["template"]["metadata"]["annotations"]["proxy.istio.io/config"])
    assert config == {
        "gatewayTopology": {"numTrustedProxies": 2},
        "runtimeValues": {"re2.max_program_size.error_level": "1000", CAP: "50000"},
    }
    # merged back as Istio applies it, the gateway passes
    envoyfilter = yaml.safe_load((out / "envoyfilter.yaml").read_text())
    decoded = decode(GATEWAY_1_3.read_bytes(), origin="t")
    fixed = with_envoyfilter(
        with_overlay(with_runtime_values(decoded, config["runtimeValues"]), _overlay(out)),
        envoyfilter,
    )
    assert _audit(fixed, limit=LIMIT)["passed"] is True


def test_a_conflicting_runtime_value_is_listed(gameday: Gameday, tmp_path: Path) -> None:
    own = {"runtimeValues": {CAP: "2147483647"}}
    deployment = _write(
        tmp_path / "deploy.yaml",
        _deployment(annotations={"proxy.istio.io/config": json.dumps(own)}),
    )
    err = _run(gameday, GATEWAY_1_3, tmp_path / "fix", "--existing", str(deployment), code=2)
    assert (
        f'conflict: proxy.istio.io/config.runtimeValues.{CAP}: "2147483647" is replaced by "50000"'
    ) in err


def _with_custom_bootstrap(name: str) -> dict[str, Any]:
    doc = _deployment()
    proxy = _proxy(doc)
    proxy["env"].append(
        {
            "name": "ISTIO_BOOTSTRAP_OVERRIDE",
            "value": "/etc/istio/custom-bootstrap/custom_bootstrap.json",
        }
    )
    proxy["volumeMounts"].append(
        {
            "name": "custom-bootstrap-volume",
            "readOnly": True,
            "mountPath": "/etc/istio/custom-bootstrap",
        }
    )
    doc["spec"]["template"]["spec"]["volumes"].append(
        {"name": "custom-bootstrap-volume", "configMap": {"name": name}}
    )
    return doc


def test_an_existing_custom_bootstrap_is_merged_not_replaced(
    gameday: Gameday, tmp_path: Path
) -> None:
    own = {
        "stats_flush_interval": "10s",
        "layered_runtime": {
            "layers": [{"name": "team", "static_layer": {"upstream.use_http2": False}}]
        },
    }
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "team-bootstrap", "namespace": "istio-system"},
        "data": {"custom_bootstrap.json": json.dumps(own), "owner": "team-edge"},
    }
    existing = _write(
        tmp_path / "existing.yaml", _with_custom_bootstrap("team-bootstrap"), configmap
    )
    out = tmp_path / "fix"
    _run(gameday, GATEWAY_1_3, out, "--existing", str(existing))
    written = yaml.safe_load((out / "custom-bootstrap-configmap.yaml").read_text())
    assert written["metadata"]["name"] == "team-bootstrap"  # the gateway's own, not a second one
    assert written["data"]["owner"] == "team-edge"  # its other keys are kept
    content = _overlay(out)
    assert content["stats_flush_interval"] == "10s"
    assert [layer["name"] for layer in content["layered_runtime"]["layers"]] == [
        "team",
        "gameday-edge-fixes",
        "admin",
    ]
    assert _monitors(content)[FIXED_HEAP]["typed_config"]["max_heap_size_bytes"] == HEAP
    patch = yaml.safe_load((out / "gateway-deployment-patch.yaml").read_text())
    assert "spec" not in patch["spec"]["template"]  # already mounted: no second volume or env
    # the ConfigMap not given: nothing written over it, and why
    err = _run(
        gameday,
        GATEWAY_1_3,
        tmp_path / "b",
        "--existing",
        str(_write(tmp_path / "d.yaml", _with_custom_bootstrap("team-bootstrap"))),
        code=2,
    )
    assert not (tmp_path / "b" / "custom-bootstrap-configmap.yaml").exists()
    assert "the gateway already takes one from ConfigMap team-bootstrap, which was not read" in err


def test_an_existing_envoyfilter_that_disagrees_is_listed(gameday: Gameday, tmp_path: Path) -> None:
    theirs = {
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "EnvoyFilter",
        "metadata": {"name": "big-buffers", "namespace": "istio-system"},
        "spec": {
            "workloadSelector": {"labels": {"istio": "ingressgateway"}},
            "configPatches": [
                {
                    "applyTo": "LISTENER",
                    "match": {"context": "GATEWAY"},
                    "patch": {
                        "operation": "MERGE",
                        "value": {"per_connection_buffer_limit_bytes": 1048576},
                    },
                }
            ],
        },
    }
    existing = _write(tmp_path / "existing.yaml", _deployment(), theirs)
    err = _run(gameday, GATEWAY_1_3, tmp_path / "fix", "--existing", str(existing), code=2)
    assert (
        "conflict: EnvoyFilter big-buffers (LISTENER) sets per_connection_buffer_limit_bytes "
        "to 1048576, ours to 32768"
    ) in err


# --- 3. the selector from the gateway's own labels ----------------------------------


def _dump_with_labels(tmp_path: Path, labels: dict[str, str]) -> Path:
    dump = json.loads(DEFAULTS.read_text())
    dump["configs"][0]["bootstrap"]["node"]["metadata"]["LABELS"] = labels
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(dump))
    return path


GATEWAY_API_LABELS = {  # what Istio's kube-gateway template puts on a gateway's pods
    "gateway.networking.k8s.io/gateway-name": "edge",
    "gateway.networking.k8s.io/gateway-class-name": "istio",
    "gateway.istio.io/managed": "istio.io-gateway-controller",
    "sidecar.istio.io/inject": "false",
    "service.istio.io/canonical-name": "edge-istio",
}


def test_a_gateway_api_gateway_gets_a_selector_that_matches_its_pods(
    gameday: Gameday, tmp_path: Path
) -> None:
    out = tmp_path / "fix"
    err = _run(
        gameday,
        _dump_with_labels(tmp_path, GATEWAY_API_LABELS),
        out,
        "--memory-limit",
        "1Gi",
        code=2,
    )
    envoyfilter = yaml.safe_load((out / "envoyfilter.yaml").read_text())
    selector = envoyfilter["spec"]["workloadSelector"]["labels"]
    assert selector == {"gateway.networking.k8s.io/gateway-name": "edge"}
    assert all(GATEWAY_API_LABELS[k] == v for k, v in selector.items())  # it matches the pods
    # no custom bootstrap claim: the kube-gateway template cannot take one
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "envoyfilter.yaml"]
    assert "Istio's kube-gateway template, which has no sidecar.istio.io/bootstrapOverride" in err
    assert "spec.infrastructure.annotations" in err
    readme = (out / "README.md").read_text()
    assert "selector=gateway.networking.k8s.io/gateway-name=edge" in readme


def test_no_selector_is_guessed(gameday: Gameday, tmp_path: Path) -> None:
    err = _run(
        gameday,
        _dump_with_labels(tmp_path, {"team": "edge"}),
        tmp_path / "a",
        "--memory-limit",
        "1Gi",
        code=2,
    )
    assert not (tmp_path / "a" / "envoyfilter.yaml").exists()
    assert "envoyfilter.yaml not written: no workload selector: none of the labels istio" in err
    # the dump's labels and the Deployment's disagree: the self-check refuses
    dump = _dump_with_labels(tmp_path, {"istio": "ingressgateway-canary"})
    err = _run(gameday, dump, tmp_path / "b", "--existing", str(DEPLOYMENT), code=2)
    assert not (tmp_path / "b" / "envoyfilter.yaml").exists()
    assert 'the selector {"istio": "ingressgateway-canary"} from configs[0].bootstrap.node' in err
    assert "does not match" in err and "spec.template.metadata.labels" in err


# --- 4. everything written is real and necessary -----------------------------------


@pytest.fixture(scope="module")
def kube_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeApi]:
    with KubeApi(tmp_path_factory.mktemp("kube") / "kubeconfig") as api:
        yield api


_NAMED = re.compile(r"(?:-f|--patch-file) (\S+)")


@pytest.mark.parametrize(
    ("source", "extra"),
    [
        (GATEWAY_1_3, ("--existing", str(DEPLOYMENT))),
        (GATEWAY_1_3, ()),
        (COMPLIANT, ("--existing", str(DEPLOYMENT), "--memory-limit", "4Gi")),
    ],
    ids=["with-deployment", "nothing-known", "only-an-envoyfilter"],
)
def test_the_readme_names_exactly_the_files_written_and_they_apply(
    gameday: Gameday, tmp_path: Path, kube_api: KubeApi, source: Path, extra: tuple[str, ...]
) -> None:
    if source == COMPLIANT:  # one failing chain: only an EnvoyFilter is needed
        dump = json.loads(COMPLIANT.read_text())
        del dump["configs"][2]["dynamic_listeners"][1]["active_state"]["listener"]["filter_chains"][
            1
        ]["filters"][0]["typed_config"]["normalize_path"]
        source = tmp_path / "dump.json"
        source.write_text(json.dumps(dump))
    out = tmp_path / "fix"
    gameday("audit", "envoy", "--source", str(source), "--fix", "istio", "-o", str(out), *extra)
    readme = (out / "README.md").read_text()
    written = sorted(p.name for p in out.iterdir() if p.name != "README.md")
    listed = re.findall(r"^- `([^`]+)`$", readme.split("## Checked")[0], re.MULTILINE)
    assert listed == written
    commands = readme.split("```sh")[1]
    assert sorted(set(_NAMED.findall(commands))) == written  # every file applied, none missing
    applied = re.findall(r"kubectl apply -f (\S+)", commands)
    done = _kubectl(
        kube_api,
        "apply",
        "--dry-run=client",
        "--validate=false",
        *[arg for f in applied for arg in ("-f", str(out / f))],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("(dry run)") == len(applied)
    if "gateway-deployment-patch.yaml" in written:
        _patched(DEPLOYMENT, out / "gateway-deployment-patch.yaml")


def test_no_empty_overlay_and_no_false_claim_on_envoys_example(
    gameday: Gameday, tmp_path: Path
) -> None:
    """Envoy's example only warns (its listener has no name): an overlay cannot name it."""
    err = _run(gameday, EXAMPLE, tmp_path, kind="envoy")
    assert not (tmp_path / "envoy-overlay.yaml").exists()
    assert "no envoy-overlay.yaml: nothing the failing rules need can be added" in err
    readme = (tmp_path / "README.md").read_text()
    assert "(re-audited before writing): listener-connection-limit." in readme
    assert "envoy-overlay.yaml" not in readme.replace("no envoy-overlay.yaml", "")
    text = (tmp_path / "envoy-bootstrap.patched.yaml").read_text()
    patched = yaml.safe_load(text)
    assert patched["static_resources"]["listeners"][0]["name"] == "example_listener_name"
    assert "# The source's comments are not carried over" in text  # said, not silently lost


def test_sidecar_advice_is_not_circular(gameday: Gameday, tmp_path: Path) -> None:
    source = UPSTREAM / "istio-sidecar-productpage-config_dump.json"
    result = gameday(
        "audit",
        "envoy",
        "--source",
        str(source),
        "--profile",
        "sidecar",
        "--fix",
        "envoy",
        "-o",
        str(tmp_path),
    )
    err = " ".join(result.stderr.split())
    assert result.returncode == 2, err
    assert "--fix istio" not in err
    assert "an EnvoyFilter with context SIDECAR_INBOUND, written by hand" in err
    refused = gameday(
        "audit",
        "envoy",
        "--source",
        str(source),
        "--profile",
        "sidecar",
        "--fix",
        "istio",
        "-o",
        str(tmp_path / "x"),
    )
    assert refused.returncode == 3 and "use --fix envoy" in refused.stderr


def test_streaming_timeouts_are_flagged_with_how_to_exempt_routes(
    gameday: Gameday, tmp_path: Path
) -> None:
    _run(gameday, GATEWAY_1_3, tmp_path, "--existing", str(DEPLOYMENT))
    readme = (tmp_path / "README.md").read_text()
    section = readme.split("## What this changes for users")[1].split("##")[0]
    assert "stream_idle_timeout 300s" in section and "route idle_timeout" in section
    assert "request_timeout 300s" in section and "enabled: false" in section
    # the re-audit runs the heap rule against the same memory limit
    assert (
        "gameday audit envoy --source 'pod://istio-system?selector=istio=ingressgateway' "
        "--profile envoy-edge --deployment istio-system/istio-ingressgateway"
    ) in readme


def test_fix_exit_codes(gameday: Gameday, tmp_path: Path) -> None:
    nothing = gameday(
        "audit", "envoy", "--source", str(COMPLIANT), "--fix", "istio", "-o", str(tmp_path / "a")
    )
    assert nothing.returncode == 0 and not (tmp_path / "a").exists()
    _run(gameday, GATEWAY_1_3, tmp_path / "b", "--existing", str(DEPLOYMENT), code=1)
    _run(gameday, GATEWAY_1_3, tmp_path / "c", code=2)  # no heap, no selector: incomplete
    bad = gameday(
        "audit",
        "envoy",
        "--source",
        str(GATEWAY_1_3),
        "--fix",
        "istio",
        "-o",
        str(tmp_path / "d"),
        "--existing",
        str(tmp_path / "missing.yaml"),
    )
    assert bad.returncode == 3 and "existing: cannot read" in bad.stderr
    assert not (tmp_path / "d").exists()
    help_text = gameday("audit", "envoy", "--help").stdout
    assert "with --fix: 0 nothing to fix" in " ".join(help_text.split())


# --- the cluster as the source of the facts ----------------------------------------


def test_deployment_read_from_the_api_gives_the_same_facts(k8s_api: Any, tmp_path: Path) -> None:
    from kubernetes import client  # noqa: PLC0415

    from chaos_ext._core.k8s import api_client  # noqa: PLC0415
    from chaos_ext.envoy.audit import load_facts  # noqa: PLC0415

    doc = copy.deepcopy(_with_custom_bootstrap("team-bootstrap"))
    api = api_client()
    client.AppsV1Api(api).create_namespaced_deployment("istio-system", doc)
    client.CoreV1Api(api).create_namespaced_config_map(
        "istio-system",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "team-bootstrap", "namespace": "istio-system"},
            "data": {"custom_bootstrap.json": '{"stats_flush_interval": "10s"}'},
        },
    )
    live = load_facts(deployment="istio-system/istio-ingressgateway")
    assert live.memory_limit_bytes == LIMIT and live.bootstrap_override == "team-bootstrap"
    assert live.labels is not None and live.labels["istio"] == "ingressgateway"
    assert live.bootstrap_configmaps == {"team-bootstrap": {"stats_flush_interval": "10s"}}
    files = load_facts(existing=[str(_write(tmp_path / "d.yaml", doc))])
    assert (files.memory_limit_bytes, files.labels, files.bootstrap_override) == (
        live.memory_limit_bytes,
        live.labels,
        live.bootstrap_override,
    )


# --- 5. small things ---------------------------------------------------------------


def test_small_input_things(gameday: Gameday, tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    result = gameday("audit", "envoy", "--source", str(empty))
    assert result.returncode == 3 and "the input is empty" in result.stderr
    assert "NoneType" not in result.stderr
    trailing = tmp_path / "envoy.yaml"
    trailing.write_text(EXAMPLE.read_text() + "\n---\n")
    assert gameday("audit", "envoy", "--source", str(trailing)).returncode == 0
    table = gameday("audit", "envoy", "--source", str(DEFAULTS)).stdout
    assert "absent (absent" not in table and "absent: Envoy uses" in table


def test_what_the_default_choice_does_not_audit_is_said(gameday: Gameday) -> None:
    """Istio's health port (15021, exposed by the default ingress Service) and the static
    clusters are named, with how to audit them, instead of being skipped silently."""
    report = json.loads(gameday("audit", "envoy", "--source", str(DEFAULTS), "--json").stdout)
    notes = " ".join(report["input"]["notes"])
    assert (
        "static listener 0.0.0.0_15021 (Istio's health port: its default ingress Service "
        "exposes it) takes HTTP but was not audited: --listener '0.0.0.0_15021'" in notes
    )
    health = gameday(
        "audit", "envoy", "--source", str(DEFAULTS), "--listener", "0.0.0.0_15021", "--json"
    )
    assert json.loads(health.stdout)["listeners"] == ["0.0.0.0_15021"]
    report = json.loads(gameday("audit", "envoy", "--source", str(GATEWAY_1_3), "--json").stdout)
    assert "3 static cluster(s) not audited (prometheus_stats, xds-grpc, zipkin)" in " ".join(
        report["input"]["notes"]
    )


def test_the_recheck_applies_an_envoyfilter_only_to_the_pods_it_selects() -> None:
    decoded = decode(GATEWAY_1_3.read_bytes(), origin="t")
    envoyfilter = {
        "spec": {
            "workloadSelector": {"labels": {"istio": "ingressgateway"}},
            "configPatches": [
                {
                    "applyTo": "LISTENER",
                    "match": {"context": "GATEWAY"},
                    "patch": {
                        "operation": "MERGE",
                        "value": {"per_connection_buffer_limit_bytes": 1},
                    },
                }
            ],
        }
    }
    selected = with_envoyfilter(decoded, envoyfilter, {"istio": "ingressgateway", "app": "x"})
    assert selected.data != decoded.data
    other = with_envoyfilter(decoded, envoyfilter, {"gateway.networking.k8s.io/gateway-name": "e"})
    assert other.data == decoded.data


def test_a_heap_too_big_in_the_gateways_own_custom_bootstrap_is_edited_there(
    gameday: Gameday, tmp_path: Path
) -> None:
    """The hand-built edge gateway's 2 GiB heap comes from its own custom bootstrap; in a
    1024Mi pod the heap rule fails. An overlay cannot change that monitor (Envoy would refuse
    a second one); the gateway's ConfigMap can be: the fix edits it there."""
    dump = json.loads(COMPLIANT.read_text())
    own = {"overload_manager": dump["configs"][0]["bootstrap"]["overload_manager"]}
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "team-bootstrap", "namespace": "istio-system"},
        "data": {"custom_bootstrap.json": json.dumps(own)},
    }
    existing = _write(
        tmp_path / "existing.yaml", _with_custom_bootstrap("team-bootstrap"), configmap
    )
    out = tmp_path / "fix"
    err = _run(gameday, COMPLIANT, out, "--existing", str(existing))
    assert "manifests applied as Istio applies them: the audit passes" in err
    assert "edited in place: ConfigMap team-bootstrap.overload_manager.resource_monitors" in err
    assert "Envoy would refuse" not in err
    content = _overlay(out)
    assert _monitors(content)[FIXED_HEAP]["typed_config"]["max_heap_size_bytes"] == HEAP
    assert [a["name"] for a in content["overload_manager"]["actions"]] == [
        a["name"] for a in own["overload_manager"]["actions"]
    ]  # kept, none added twice
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "custom-bootstrap-configmap.yaml"]
