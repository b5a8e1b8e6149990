"""`gameday schedule`: manifests valid for Kubernetes, RBAC exactly as declared, a runnable job."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from support.gameday_cli import ROOT, cli_env, run_gameday
from support.harness import netns_list, wait_for
from support.kube_api import KubeApi

from chaos_ext._products.schedule.manifests import ABORT_KEY, RUNNER_UID
from chaos_ext._runner.signals import SIGNAL_EXIT_BUDGET_S, TERMINATION_GRACE_S

K8S_VERSIONS = ("1.27.0", "1.33.0")  # CronJob timeZone is GA from 1.27


def _activity(func: str, kind: str = "action", **arguments: Any) -> dict[str, Any]:
    activity = {
        "type": kind,
        "name": func.replace("_", "-"),
        "provider": {
            "type": "python",
            "module": "support.rbackit",
            "func": func,
            "arguments": arguments,
        },
    }
    if kind == "probe":
        activity["tolerance"] = True
    return activity


def _experiment(tmp: Path, name: str, hypothesis: list[dict], method: list[dict]) -> Path:
    experiment: dict[str, Any] = {"title": name, "description": "schedule test", "method": method}
    if hypothesis:
        experiment["steady-state-hypothesis"] = {"title": "h", "probes": hypothesis}
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(experiment))
    return path


def _schedule(
    tmp: Path, *args: str
) -> tuple[list[dict[str, Any]], subprocess.CompletedProcess[str]]:
    out = run_gameday(tmp, tmp / "ledger.sqlite3", "schedule", *args)
    docs = [d for d in yaml.safe_load_all(out.stdout) if d] if out.returncode == 0 else []
    return docs, out


def _by_kind(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        found.setdefault(doc["kind"], []).append(doc)
    return found


def _rules(role: dict[str, Any]) -> set[tuple[str, str, tuple[str, ...]]]:
    """(group, resource, verbs) of each rule; each rule names one group and one resource."""
    assert all(len(r["apiGroups"]) == len(r["resources"]) == 1 for r in role["rules"])
    return {(r["apiGroups"][0], r["resources"][0], tuple(r["verbs"])) for r in role["rules"]}


@pytest.fixture(scope="module")
def kube_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeApi]:
    with KubeApi(tmp_path_factory.mktemp("kube") / "kubeconfig") as api:
        yield api


def _validate(docs: list[dict[str, Any]], api: KubeApi, tmp: Path) -> None:
    for doc in docs:
        for version in K8S_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)
    manifest = tmp / "manifests.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    env = {**os.environ, "KUBECONFIG": str(api.kubeconfig)}
    applied = subprocess.run(
        ["kubectl", "apply", "--dry-run=client", "--validate=false", "-f", str(manifest)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    lines = [line for line in applied.stdout.splitlines() if line.strip()]
    assert len(lines) == len(docs) and all(line.endswith("(dry run)") for line in lines)


def test_drain_set_cluster_rules_in_a_clusterrole_namespaced_in_a_role(
    tmp_path: Path, kube_api: KubeApi
) -> None:
    path = _experiment(
        tmp_path,
        "drain",
        [_activity("pods_ready", "probe", namespace="shop")],
        [_activity("drain_node", name="node-1")],
    )
    docs, out = _schedule(
        tmp_path,
        str(path),
        "--cron",
        "0 10 * * 2",
        "--namespace",
        "chaos",
        "--target-namespace",
        "shop",
    )
    assert out.returncode == 0, out.stderr
    _validate(docs, kube_api, tmp_path)
    kinds = _by_kind(docs)
    (cluster_role,) = kinds["ClusterRole"]
    assert _rules(cluster_role) == {("", "nodes", ("get", "list", "patch"))}
    (role,) = kinds["Role"]
    assert role["metadata"]["namespace"] == "shop"
    assert _rules(role) == {("", "pods", ("get", "list")), ("", "pods/eviction", ("create",))}
    (binding,) = kinds["RoleBinding"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gameday", "namespace": "chaos"}
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert kinds["ClusterRoleBinding"][0]["roleRef"]["kind"] == "ClusterRole"
    (cron,) = kinds["CronJob"]
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    assert cron["spec"]["schedule"] == "0 10 * * 2"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "gameday" and pod["automountServiceAccountToken"] is True
    assert pod["securityContext"]["runAsUser"] == RUNNER_UID
    script = pod["containers"][0]["command"][2]
    assert script.index("gameday run ") < script.index("gameday report ")
    (config,) = kinds["ConfigMap"]
    assert config["data"] == {"drain.json": path.read_text()}


def test_sidecar_set_gets_one_role_per_target_namespace_and_nothing_cluster_wide(
    tmp_path: Path, kube_api: KubeApi
) -> None:
    sidecar = _activity("patch_sidecar", deployment="web", image="envoy:1.30")
    path = _experiment(tmp_path, "sidecar", [], [sidecar])
    plan = tmp_path / "abort.yaml"
    plan.write_text(
        "interval_seconds: 1\nconditions:\n  - probe: http-error-ratio\n"
        "    parameters: {job: checkout}\n"
    )
    docs, out = _schedule(
        tmp_path,
        str(path),
        "--cron",
        "@weekly",
        "--abort-on",
        str(plan),
        "--target-namespace",
        "shop",
        "--target-namespace",
        "web",
        "--time-zone",
        "Europe/Paris",
    )
    assert out.returncode == 0, out.stderr
    _validate(docs, kube_api, tmp_path)
    kinds = _by_kind(docs)
    assert "ClusterRole" not in kinds and "ClusterRoleBinding" not in kinds
    roles = {r["metadata"]["namespace"]: _rules(r) for r in kinds["Role"]}
    assert roles == {ns: {("apps", "deployments", ("get", "patch"))} for ns in ("shop", "web")}
    assert len(kinds["RoleBinding"]) == 2
    assert kinds["CronJob"][0]["spec"]["timeZone"] == "Europe/Paris"
    assert kinds["ConfigMap"][0]["data"][ABORT_KEY] == plan.read_text()
    script = kinds["CronJob"][0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][
        0
    ]["command"][2]
    assert f'gameday run --journal-dir "$out/run" --abort-on /experiments/{ABORT_KEY} ' in script


def test_all_namespaces_puts_every_rule_in_the_clusterrole(
    tmp_path: Path, kube_api: KubeApi
) -> None:
    path = _experiment(tmp_path, "drain", [], [_activity("drain_node", name="n")])
    docs, out = _schedule(tmp_path, str(path), "--cron", "0 3 * * *", "--all-namespaces")
    assert out.returncode == 0, out.stderr
    _validate(docs, kube_api, tmp_path)
    kinds = _by_kind(docs)
    assert "Role" not in kinds
    assert _rules(kinds["ClusterRole"][0]) == {
        ("", "nodes", ("get", "list", "patch")),
        ("", "pods", ("list",)),
        ("", "pods/eviction", ("create",)),
    }


def test_no_kubernetes_activity_means_no_role_and_no_token(
    tmp_path: Path, kube_api: KubeApi
) -> None:
    path = _experiment(tmp_path, "plain", [], [_activity("no_kubernetes", kind="probe", value=1)])
    docs, out = _schedule(
        tmp_path,
        str(path),
        "--cron",
        "0 3 * * *",
        "--push-command",
        'cp -r "$REPORT_DIR" /elsewhere',
        "--no-pvc",
    )
    assert out.returncode == 0, out.stderr
    _validate(docs, kube_api, tmp_path)
    kinds = _by_kind(docs)
    assert set(kinds) == {"ConfigMap", "ServiceAccount", "CronJob"}  # --no-pvc: no claim
    pod = kinds["CronJob"][0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert "CHAOSTOOLKIT_IN_POD" not in {e["name"] for e in pod["containers"][0]["env"]}
    assert {"name": "reports", "emptyDir": {}} in pod["volumes"]


def test_undeclared_kubernetes_activities_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "k8s.json"
    path.write_text(
        json.dumps(
            {
                "title": "t",
                "description": "d",
                "method": [
                    {
                        "type": "action",
                        "name": "scale",
                        "provider": {
                            "type": "python",
                            "module": "chaosk8s.deployment.actions",
                            "func": "scale_deployment",
                            "arguments": {"name": "web", "replicas": 0},
                        },
                    }
                ],
            }
        )
    )
    _, refused = _schedule(tmp_path, str(path), "--cron", "@daily")
    assert refused.returncode == 3
    assert "chaosk8s.deployment.actions.scale_deployment" in refused.stderr
    docs, allowed = _schedule(tmp_path, str(path), "--cron", "@daily", "--allow-undeclared")
    assert (
        allowed.returncode == 0 and "grant these activities' permissions yourself" in allowed.stderr
    )
    assert "Role" not in _by_kind(docs) and "ClusterRole" not in _by_kind(docs)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--cron", "every tuesday"), "expected five fields"),
        (("--cron", "@daily", "--name", "Game_Day"), "lowercase letters"),
    ],
)
def test_bad_options_are_invalid_input(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    _, out = _schedule(tmp_path, str(ROOT / "experiments" / "ledger-clean.json"), *args)
    assert out.returncode == 3 and message in out.stderr


def test_the_job_script_runs_the_game_day_and_writes_the_report(tmp_path: Path) -> None:
    """The CronJob's own shell script, run here with its volumes mapped to folders."""
    push = 'ls "$REPORT_DIR" > "$REPORT_DIR/../pushed"'
    experiment = str(ROOT / "experiments" / "ledger-clean.json")
    docs, out = _schedule(tmp_path, experiment, "--cron", "@daily", "--push-command", push)
    assert out.returncode == 0, out.stderr
    kinds = _by_kind(docs)
    container = kinds["CronJob"][0]["spec"]["jobTemplate"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    experiments, reports = tmp_path / "experiments", tmp_path / "reports"
    experiments.mkdir()
    for key, text in kinds["ConfigMap"][0]["data"].items():
        (experiments / key).write_text(text)
    script = container["command"][2].replace("/experiments", str(experiments))
    script = script.replace("/reports", str(reports))
    env = cli_env(reports / ".ledger" / "ledger.sqlite3")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    ran = subprocess.run(
        ["/bin/sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (run_dir,) = [p for p in reports.iterdir() if re.fullmatch(r"\d{8}T\d{6}Z", p.name)]
    assert (run_dir / "report.html").exists() and (run_dir / "summary.md").exists()
    assert "held" in (run_dir / "summary.md").read_text()
    assert set((reports / "pushed").read_text().split()) == {
        "journals",
        "report.html",
        "run",
        "summary.md",
    }


def test_dockerfile_matches_the_manifests() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    for source in re.findall(r"^COPY (?!--from)(.+) \S+$", dockerfile, re.M):
        for name in source.split():
            assert (ROOT / name).exists(), name
    assert f"USER {RUNNER_UID}:{RUNNER_UID}" in dockerfile
    assert 'ENTRYPOINT ["gameday"]' in dockerfile
    assert "MPLCONFIGDIR=/tmp/matplotlib" in dockerfile  # read-only root filesystem
    # the catalog is package data (real files in chaos_ext/prometheus/catalog/): no COPY of
    # probes/; tests/test_image_wheel.py builds the wheel from these COPY lines and uses it
    assert not [line for line in dockerfile.splitlines() if "COPY" in line and "probes" in line]


def test_literal_secrets_are_refused_env_secrets_accepted(tmp_path: Path) -> None:
    def write(secrets: dict[str, Any]) -> Path:
        path = tmp_path / "with-secrets.json"
        method = [_activity("no_kubernetes", kind="probe")]
        experiment = {"title": "t", "description": "d", "secrets": secrets, "method": method}
        path.write_text(json.dumps(experiment))
        return path

    _, literal = _schedule(
        tmp_path, str(write({"db": {"password": "hunter2-literal"}})), "--cron", "@daily"
    )
    assert literal.returncode == 3 and "literal secret values" in literal.stderr
    assert "hunter2-literal" not in literal.stdout + literal.stderr
    env_secret = {"db": {"password": {"type": "env", "key": "DB_PASSWORD"}}}
    docs, ok = _schedule(
        tmp_path, str(write(env_secret)), "--cron", "@daily", "--env-from-secret", "db-credentials"
    )
    assert ok.returncode == 0, ok.stderr
    container = _by_kind(docs)["CronJob"][0]["spec"]["jobTemplate"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    assert container["envFrom"] == [{"secretRef": {"name": "db-credentials"}}]


def test_the_job_passes_sigterm_on_and_its_grace_period_covers_the_rollback(
    tmp_path: Path,
) -> None:
    """Issue 22, point 4: the pod's shell (PID 1) forwards SIGTERM; the runner rolls back.

    The CronJob's own script runs here under /bin/sh; the experiment injects a
    real fault (a network namespace) and then pauses 30 s. SIGTERM to the shell
    must end the job within the runner's budget, with the journal written and
    the namespace gone, well inside the pod's terminationGracePeriodSeconds.
    """
    ns = f"gdt-{uuid.uuid4().hex[:8]}"
    fault = {
        "type": "action",
        "name": "make-namespace",
        "pauses": {"after": 30},
        "provider": {
            "type": "python",
            "module": "support.faultkit",
            "func": "create_netns",
            "arguments": {"name": ns},
        },
    }
    path = _experiment(tmp_path, "paused", [], [fault])
    docs, out = _schedule(tmp_path, str(path), "--cron", "@daily")
    assert out.returncode == 0, out.stderr
    pod = _by_kind(docs)["CronJob"][0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == TERMINATION_GRACE_S > 3 * SIGNAL_EXIT_BUDGET_S
    experiments, reports = tmp_path / "experiments", tmp_path / "reports"
    experiments.mkdir()
    for key, text in _by_kind(docs)["ConfigMap"][0]["data"].items():
        (experiments / key).write_text(text)
    script = pod["containers"][0]["command"][2].replace("/experiments", str(experiments))
    script = script.replace("/reports", str(reports))
    env = cli_env(reports / ".ledger" / "ledger.sqlite3")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    shell = subprocess.Popen(
        ["/bin/sh", "-c", script],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(lambda: ns in netns_list(), 60, "the fault")
        time.sleep(1.0)  # in the pause
        sent = time.monotonic()
        shell.send_signal(signal.SIGTERM)
        output, _ = shell.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if shell.poll() is None:
            shell.kill()
            shell.wait(timeout=10)
        if ns in netns_list():
            subprocess.run(["ip", "netns", "delete", ns], check=False, timeout=10)
    assert took < SIGNAL_EXIT_BUDGET_S, output
    assert shell.returncode == 2, output
    assert ns not in netns_list()
    (journal,) = reports.glob("*/run/journal-*.json")
    assert json.loads(journal.read_text())["gameday"]["outcome"] == "interrupted"
    assert not list(reports.glob("*/report.html"))  # stopped: no report, exit code kept
