"""``--fix istio|envoy``: the written files, merged back as Envoy/Istio merge them, pass the audit.

The merge semantics are checked on their own first: protobuf MergeFrom as Envoy
applies ``--config-yaml`` (and Istio's custom bootstrap), and pilot-agent's
``runtimeValues`` against Istio's own bootstrap golden for that setting. The
round trips then read the files from disk (not the tool's in-memory objects),
apply them, and audit the result. The Kubernetes manifests go through
``kubectl apply --dry-run=client`` against kmock's API emulator (kubectl needs
an API's discovery documents even for a client-side dry run; there is no
openapi document, hence ``--validate=false``), ``kubectl patch --local``
against Istio's real gateway Deployment, kubernetes-validate for the built-in
kinds and Istio's EnvoyFilter CRD schema.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from support.envoy_dumps import COMPLIANT, DEFAULTS
from support.kube_api import KubeApi

from chaos_ext.envoy._apply import with_envoyfilter, with_overlay, with_runtime_values
from chaos_ext.envoy._input import Decoded, decode
from chaos_ext.envoy._merge import proto_merge, split_duplicates
from chaos_ext.envoy._pipeline import audit_decoded
from chaos_ext.envoy._profiles import effective_rules

UPSTREAM = Path(__file__).parent / "fixtures" / "upstream"
GATEWAY_1_3 = UPSTREAM / "istio-ingressgateway-config_dump.json"
DEPLOYMENT = UPSTREAM / "istio-ingressgateway-deployment.yaml"  # limits.memory: 1024Mi
K8S_VERSION = "1.33.0"
Gameday = Callable[..., subprocess.CompletedProcess[str]]


def _audit(decoded: Decoded, profile: str = "envoy-edge", role: str = "auto") -> dict[str, Any]:
    chosen, rules = effective_rules(profile, None, "")
    return audit_decoded(decoded, origin="t", profile=chosen, rules=rules, role=role).report


def _fix(
    gameday: Gameday, source: Path, kind: str, out: Path, *extra: str, code: int = 1
) -> subprocess.CompletedProcess[str]:
    """Run --fix; exit 1: the fix is complete (the audited input itself still fails)."""
    result = gameday(
        "audit", "envoy", "--source", str(source), "--fix", kind, "-o", str(out), *extra
    )
    assert result.returncode == code, result.stdout + result.stderr
    return result


def _istio_files(out: Path) -> tuple[dict[str, Any], dict[str, str], dict[str, Any]]:
    configmap = yaml.safe_load((out / "custom-bootstrap-configmap.yaml").read_text())
    patch = yaml.safe_load((out / "gateway-deployment-patch.yaml").read_text())
    annotations = patch["spec"]["template"]["metadata"]["annotations"]
    values = json.loads(annotations.get("proxy.istio.io/config", "{}")).get("runtimeValues", {})
    envoyfilter = yaml.safe_load((out / "envoyfilter.yaml").read_text())
    return json.loads(configmap["data"]["custom_bootstrap.json"]), values, envoyfilter


# --- merge semantics ---------------------------------------------------------


def test_proto_merge_is_protobuf_merge_from() -> None:
    base = {
        "overload_manager": {"refresh_interval": "1s", "actions": [{"name": "a"}]},
        "admin": {"address": {"socket_address": {"address": "0.0.0.0", "port_value": 1}}},
        "layered_runtime": {
            "layers": [{"name": "l0", "static_layer": {"envoy": {"a": 1, "b": 2}, "x": 1}}]
        },
        "monitor": {"typed_config": {"@type": "t/A", "p": 1, "q": 2}},
    }
    overlay = {
        "overload_manager": {"refresh_interval": "0.25s", "actions": [{"name": "b"}]},
        "admin": {"address": {"socket_address": {"address": "127.0.0.1"}}},
        "monitor": {"typed_config": {"@type": "t/A", "p": 9}},
    }
    merged = proto_merge(base, overlay)
    assert merged["overload_manager"] == {  # scalars replaced, repeated fields appended
        "refresh_interval": "0.25s",
        "actions": [{"name": "a"}, {"name": "b"}],
    }
    assert merged["admin"]["address"]["socket_address"] == {"address": "127.0.0.1", "port_value": 1}
    assert merged["monitor"]["typed_config"] == {"@type": "t/A", "p": 9}  # an Any is replaced
    assert proto_merge(base, overlay, deep_any=True)["monitor"]["typed_config"] == {
        "@type": "t/A",
        "p": 9,
        "q": 2,  # Istio's EnvoyFilter MERGE unpacks and merges
    }
    layered = proto_merge(base, {"layered_runtime": {"layers": [{"name": "l1"}]}})
    assert [layer["name"] for layer in layered["layered_runtime"]["layers"]] == ["l0", "l1"]
    struct = proto_merge(
        base["layered_runtime"]["layers"][0], {"static_layer": {"envoy": {"a": 3}}}
    )
    assert struct["static_layer"] == {"envoy": {"a": 3}, "x": 1}  # Struct entries: replaced whole
    assert base["overload_manager"]["actions"] == [{"name": "a"}]  # inputs untouched


def test_an_overlay_never_appends_a_second_element_of_one_name() -> None:
    base = {"overload_manager": {"resource_monitors": [{"name": "m1"}], "actions": []}}
    overlay = {
        "overload_manager": {
            "resource_monitors": [{"name": "m1"}, {"name": "m2"}],
            "refresh_interval": "1s",
        }
    }
    clean, dropped = split_duplicates(base, overlay)
    assert clean == {
        "overload_manager": {"resource_monitors": [{"name": "m2"}], "refresh_interval": "1s"}
    }
    assert dropped == ["overload_manager.resource_monitors[?name = 'm1']"]


def test_runtime_values_are_applied_as_pilot_agent_does() -> None:
    """Istio's default bootstrap golden + ProxyConfig runtime_values (from its .proxycfg)
    gives Istio's own global_downstream_max_connections_runtime golden."""
    proxycfg = (UPSTREAM / "istio-bootstrap-runtime-values.proxycfg").read_text()
    assert (
        'runtime_values:            [{ key: "overload.global_downstream_max_connections" '
        'value: "5000" }]' in proxycfg
    )
    base = decode((UPSTREAM / "istio-bootstrap-default-golden.json").read_bytes(), origin="a")
    expected = json.loads((UPSTREAM / "istio-bootstrap-runtime-values-golden.json").read_text())
    got = with_runtime_values(base, {"overload.global_downstream_max_connections": "5000"}).data
    assert got["layered_runtime"] == expected["layered_runtime"]
    assert got["overload_manager"] == expected["overload_manager"]


# --- --fix istio ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("dump", "profile"),
    [(GATEWAY_1_3, "envoy-edge"), (DEFAULTS, "envoy-edge"), (DEFAULTS, "hardened")],
)
def test_fix_istio_merged_back_passes(
    gameday: Gameday, tmp_path: Path, dump: Path, profile: str
) -> None:
    result = _fix(
        gameday, dump, "istio", tmp_path, "--profile", profile, "--existing", str(DEPLOYMENT)
    )
    assert "manifests applied as Istio applies them: the audit passes" in (
        " ".join(result.stderr.split())
    )
    overlay, values, envoyfilter = _istio_files(tmp_path)
    decoded = decode(dump.read_bytes(), origin="t")
    assert _audit(decoded, profile)["passed"] is False
    # pilot-agent writes the bootstrap with runtimeValues, Envoy merges the custom bootstrap,
    # istiod pushes listeners and clusters with the EnvoyFilter applied
    fixed = with_envoyfilter(
        with_overlay(with_runtime_values(decoded, values), overlay), envoyfilter
    )
    report = _audit(fixed, profile)
    assert report["passed"] is True, report["summary"]
    assert values == {"overload.global_downstream_max_connections": "50000"}
    readme = (tmp_path / "README.md").read_text()
    assert "gameday audit envoy --source 'pod://istio-system?selector=istio=ingressgateway'" in (
        readme
    )


def test_fix_istio_patches_only_the_failing_filter_chain(gameday: Gameday, tmp_path: Path) -> None:
    dump = json.loads(COMPLIANT.read_text())
    chain = dump["configs"][2]["dynamic_listeners"][1]["active_state"]["listener"]["filter_chains"][
        1
    ]
    del chain["filters"][0]["typed_config"]["normalize_path"]  # the api.shop.example.com chain
    source = tmp_path / "dump.json"
    source.write_text(json.dumps(dump))
    # the dump's heap is 2 GiB: a 4Gi container (not the Deployment's 1024Mi) leaves it alone
    _fix(
        gameday,
        source,
        "istio",
        tmp_path / "out",
        "--existing",
        str(DEPLOYMENT),
        "--memory-limit",
        "4Gi",
    )
    envoyfilter = yaml.safe_load((tmp_path / "out" / "envoyfilter.yaml").read_text())
    (patch,) = envoyfilter["spec"]["configPatches"]
    sni = chain["filter_chain_match"]["server_names"][0]
    hcm_filter = {"name": "envoy.filters.network.http_connection_manager"}
    assert patch["match"]["listener"] == {
        "portNumber": 8443,
        "filterChain": {"sni": sni, "filter": hcm_filter},
    }
    assert patch["patch"]["value"]["typed_config"]["normalize_path"] is True
    assert not (tmp_path / "out" / "custom-bootstrap-configmap.yaml").exists()


@pytest.fixture(scope="module")
def kube_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeApi]:
    with KubeApi(tmp_path_factory.mktemp("kube") / "kubeconfig") as api:
        yield api


def _kubectl(api: KubeApi | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(api.kubeconfig) if api else "/nonexistent"}
    return subprocess.run(
        ["kubectl", *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )


def test_fix_istio_manifests_pass_kubectl_and_the_schemas(
    gameday: Gameday, tmp_path: Path, kube_api: KubeApi
) -> None:
    out = tmp_path / "fix"
    _fix(gameday, GATEWAY_1_3, "istio", out, "--existing", str(DEPLOYMENT))
    configmap = yaml.safe_load((out / "custom-bootstrap-configmap.yaml").read_text())
    kubernetes_validate.validate(configmap, K8S_VERSION, strict=True)
    crd = yaml.safe_load((UPSTREAM / "istio-envoyfilter-crd.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha3"]
    envoyfilter = yaml.safe_load((out / "envoyfilter.yaml").read_text())
    jsonschema.validate(
        envoyfilter["spec"], version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    )
    with pytest.raises(jsonschema.ValidationError):  # the schema does bite
        jsonschema.validate(
            {"configPatches": [{"applyTo": "NOT_A_TARGET"}]},
            version["schema"]["openAPIV3Schema"]["properties"]["spec"],
        )
    assert not (out / "gateway-deployment-patch-noninjected.yaml").exists()
    for name in ("gateway-deployment-patch.yaml",):
        patched = _kubectl(
            None,
            "patch",
            "--local",
            "-f",
            str(DEPLOYMENT),
            "--type",
            "strategic",
            "--patch-file",
            str(out / name),
            "-o",
            "json",
        )
        assert patched.returncode == 0, patched.stderr
        doc = json.loads(patched.stdout)
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        template = doc["spec"]["template"]
        assert "proxy.istio.io/config" in template["metadata"]["annotations"]
        (out / f"patched-{name}").write_text(patched.stdout)
        (proxy,) = [c for c in template["spec"]["containers"] if c["name"] == "istio-proxy"]
        assert {
            "name": "ISTIO_BOOTSTRAP_OVERRIDE",
            "value": "/etc/istio/custom-bootstrap/custom_bootstrap.json",
        } in proxy["env"]
        assert len(proxy["env"]) > 1  # merged into Istio's env list, not replacing it
        assert {
            "name": "custom-bootstrap-volume",
            "configMap": {
                "name": configmap["metadata"]["name"],
                "defaultMode": 420,
                "optional": False,
            },
        } in template["spec"]["volumes"]
        assert "sidecar.istio.io/bootstrapOverride" not in template["metadata"]["annotations"]
    files = [
        out / "custom-bootstrap-configmap.yaml",
        out / "envoyfilter.yaml",
        out / "patched-gateway-deployment-patch.yaml",
    ]
    applied = _kubectl(
        kube_api,
        "apply",
        "--dry-run=client",
        "--validate=false",
        *[arg for f in files for arg in ("-f", str(f))],
    )
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.split() == [
        "configmap/istio-ingressgateway-edge-bootstrap",
        "created",
        "(dry",
        "run)",
        "envoyfilter.networking.istio.io/istio-ingressgateway-edge-hardening",
        "created",
        "(dry",
        "run)",
        "deployment.apps/istio-ingressgateway",
        "created",
        "(dry",
        "run)",
    ]


# --- --fix envoy ---------------------------------------------------------------


def test_fix_envoy_overlay_merged_into_istios_bootstrap_passes(
    gameday: Gameday, tmp_path: Path
) -> None:
    source = UPSTREAM / "istio-bootstrap-default-golden-runtime-key.json"
    _fix(gameday, source, "envoy", tmp_path, "--role", "gateway", "--memory-limit", "1024Mi")
    overlay = yaml.safe_load((tmp_path / "envoy-overlay.yaml").read_text())
    decoded = decode(source.read_bytes(), origin="t")
    merged = with_overlay(decoded, overlay)
    assert _audit(merged, role="gateway")["passed"] is True
    layers = merged.data["layered_runtime"]["layers"]
    assert [layer["name"] for layer in layers] == ["global config", "admin", "gameday-edge-fixes"]
    patched = json.loads((tmp_path / "envoy-bootstrap.patched.json").read_text())
    assert _audit(Decoded("bootstrap", patched, "JSON"), role="gateway")["passed"] is True


def test_fix_envoy_says_what_an_overlay_cannot_fix(gameday: Gameday, tmp_path: Path) -> None:
    """Istio >= 1.28 caps connections with a resource monitor at 2147483647: appending a second
    monitor is refused by Envoy, and a runtime key loses to the monitor."""
    source = UPSTREAM / "istio-bootstrap-default-golden.json"
    result = _fix(gameday, source, "envoy", tmp_path, "--role", "gateway", "--memory-limit", "1Gi")
    err = " ".join(result.stderr.split())
    assert (
        "merged as Envoy merges --config-yaml: still failing: global-downstream-max-"
        "connections" in err
    )
    overlay = yaml.safe_load((tmp_path / "envoy-overlay.yaml").read_text())
    assert _audit(with_overlay(decode(source.read_bytes(), origin="t"), overlay), role="gateway")[
        "summary"
    ]["failed_rules"] == ["global-downstream-max-connections"]
    patched = json.loads((tmp_path / "envoy-bootstrap.patched.json").read_text())
    monitor = patched["overload_manager"]["resource_monitors"][0]
    assert monitor["typed_config"]["max_active_downstream_connections"] == 50000
    assert _audit(Decoded("bootstrap", patched, "JSON"), role="gateway")["passed"] is True


def test_fix_envoy_on_envoys_example_under_hardened(gameday: Gameday, tmp_path: Path) -> None:
    source = UPSTREAM / "envoy-edge-example-02a45cb9.yaml"
    result = _fix(gameday, source, "envoy", tmp_path, "--profile", "hardened")
    err = " ".join(result.stderr.split())
    # the example has its fixed_heap monitor; with no memory limit known it is left as it is
    assert "resource_monitors" not in err
    overlay = yaml.safe_load((tmp_path / "envoy-overlay.yaml").read_text())
    assert "resource_monitors" not in overlay["overload_manager"]
    assert [a["name"] for a in overlay["overload_manager"]["actions"]] == [
        "envoy.overload_actions.disable_http_keepalive",
        "envoy.overload_actions.reduce_timeouts",
    ]
    decoded = decode(source.read_bytes(), origin="t")
    merged = _audit(with_overlay(decoded, overlay), "hardened")
    assert merged["summary"]["failed_rules"] == [  # listener fields: not by an overlay
        "listener-connection-limit",
        "max-connection-duration",
        "request-headers-timeout",
    ]
    patched = yaml.safe_load((tmp_path / "envoy-bootstrap.patched.yaml").read_text())
    assert patched["static_resources"]["listeners"][0]["name"] == "example_listener_name"
    assert _audit(Decoded("bootstrap", patched, "YAML"), "hardened")["passed"] is True


def test_fix_needs_an_output_directory_and_a_failing_audit(
    gameday: Gameday, tmp_path: Path
) -> None:
    result = gameday("audit", "envoy", "--source", str(COMPLIANT), "--fix", "istio")
    assert result.returncode == 3 and "--fix needs -o DIR" in result.stderr
    result = gameday(
        "audit", "envoy", "--source", str(COMPLIANT), "--fix", "istio", "-o", str(tmp_path / "out")
    )
    assert result.returncode == 0 and "nothing to fix" in result.stderr
    assert not (tmp_path / "out").exists()
    plain = UPSTREAM / "envoy-edge-example-v2-03a59e29.yaml"
    result = gameday(
        "audit", "envoy", "--source", str(plain), "--fix", "istio", "-o", str(tmp_path / "x")
    )
    assert result.returncode == 3 and "--fix istio writes manifests for an Istio gateway" in (
        " ".join(result.stderr.split())
    )
