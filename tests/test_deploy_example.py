"""deploy/: the worked example is what `gameday schedule` generates today, and what it shows.

The command is read from deploy/README.md (the one place it is written), run
with the real CLI, and its output compared with the committed
deploy/example/gameday.yaml. Then what the example promises: the SSH key and
known_hosts mounted from a Secret as files, the variables that name them, the
claim that keeps the ledger, the rclone push; and the warnings for URLs that
would point at the pod itself.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from support.gameday_cli import ROOT, run_gameday

README = ROOT / "deploy" / "README.md"
EXAMPLE = ROOT / "deploy" / "example" / "gameday.yaml"
K8S_VERSIONS = ("1.27.0", "1.33.0")


def _documented_command() -> list[str]:
    """The `gameday schedule ...` of deploy/README.md, continuation lines joined."""
    lines = README.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("gameday schedule "))
    text = ""
    for line in lines[start:]:
        text += line.removesuffix("\\") + " "
        if not line.endswith("\\"):
            break
    return shlex.split(text)


def _schedule(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = run_gameday(ROOT, tmp_path / "ledger.sqlite3", *args)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_the_committed_example_is_what_schedule_generates_today(tmp_path: Path) -> None:
    argv = _documented_command()
    assert argv[:2] == ["gameday", "schedule"] and argv[-2:] == [
        "-o",
        str(EXAMPLE.relative_to(ROOT)),
    ]
    out = tmp_path / "gameday.yaml"
    result = _schedule(tmp_path, *argv[1:-2], "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "⚠" not in result.stderr, result.stderr  # the example's URLs are the cluster's
    assert out.read_text() == EXAMPLE.read_text(), (
        "deploy/example/gameday.yaml is stale: run the command in deploy/README.md again"
    )


def _pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (cron,) = [d for d in docs if d["kind"] == "CronJob"]
    pod: dict[str, Any] = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return pod


def test_the_example_mounts_ssh_files_keeps_the_ledger_and_pushes_with_rclone() -> None:
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    for doc in docs:
        for version in K8S_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)
    pod = _pod(docs)
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["GAMEDAY_SSH_KEY_FILE"] == "/etc/gameday/ssh/ssh-privatekey"
    assert env["GAMEDAY_SSH_KNOWN_HOSTS"] == "/etc/gameday/ssh/known_hosts"
    assert env["CHAOSTOOLKIT_IN_POD"] == "true"  # the clients use the ServiceAccount's token
    assert pod["automountServiceAccountToken"] is True
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["ssh"] == {"name": "ssh", "mountPath": "/etc/gameday/ssh", "readOnly": True}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["ssh"]["secret"] == {"secretName": "gameday-ssh", "defaultMode": 0o440}
    assert volumes["reports"]["persistentVolumeClaim"] == {"claimName": "gameday-reports"}
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "PersistentVolumeClaim"] == [
        "gameday-reports"
    ]
    assert container["envFrom"] == [{"secretRef": {"name": "gameday-reports-remote"}}]
    script = container["command"][2]
    assert 'rclone copy "$REPORT_DIR"' in script
    # the experiment reads exactly the variables the Secret's files are named by
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    experiment = config_map["data"]["db-latency.json"]
    assert '"GAMEDAY_SSH_KEY_FILE"' in experiment and '"GAMEDAY_SSH_KNOWN_HOSTS"' in experiment


EXPERIMENT = str(ROOT / "experiments" / "db-latency.json")


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            [],
            "⚠ db-latency.json: prometheus_url is http://127.0.0.1:9090 (the default of "
            "$PROMETHEUS_URL, which the pod does not set unless a Secret of --env-from-secret "
            "does): in the pod, 127.0.0.1 is the pod itself, where nothing listens; give --var "
            "prometheus_url=http://<service>.<namespace>.svc:<port>",
        ),
        (
            ["--var", "prometheus_url=http://localhost:9090"],
            "⚠ --var prometheus_url=http://localhost:9090: in the pod, localhost is the pod itself",
        ),
    ],
)
def test_urls_that_point_at_the_pod_itself_are_warned_about(
    extra: list[str], expected: str, tmp_path: Path
) -> None:
    result = _schedule(tmp_path, "schedule", EXPERIMENT, "--cron", "@daily", *extra)
    assert result.returncode == 0, result.stderr  # a warning: the manifests are written
    assert [d["kind"] for d in yaml.safe_load_all(result.stdout) if d][-1] == "CronJob"
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("⚠")]
    assert line.startswith(expected), line


def test_a_var_no_experiment_declares_is_refused_by_schedule(tmp_path: Path) -> None:
    result = _schedule(
        tmp_path, "schedule", EXPERIMENT, "--cron", "@daily", "--var", "prometheus_ulr=http://p"
    )
    assert result.returncode == 3 and not result.stdout
    assert "--var prometheus_ulr:" in result.stderr
    assert "did you mean prometheus_url?" in result.stderr
