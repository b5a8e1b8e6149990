"""A load from many pods against the Kubernetes API emulator (kmock, real client over HTTP).

The Job and its Secret are created by drive_http_load, validated against the
upstream Kubernetes schemas (kubernetes-validate), their pods made by the
emulator's Job controller, and deleted by the ledger's undo with foreground
propagation: from stop_http_load, and from ``gameday rollback`` after a
SIGKILL of the runner. The Role ``gameday schedule`` derives must permit
every API call the load made, and only experiments that use it get it.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from support.harness import cli_env, gameday_argv, wait_for
from support.k8s_emulator import EmulatorHandle

from chaos_ext._core.ledger import Ledger
from chaos_ext._products.schedule.permissions import permissions_of
from chaos_ext.errors import InvalidArgument
from chaos_ext.load import _distributed, _job
from chaos_ext.load.actions import drive_http_load, stop_http_load

K8S_VERSIONS = ("1.27.0", "1.33.0")
NS = "loadtest"
# nothing listens there: these tests are about the Job, not results (test_load_sharded.py)
KUBE = {"namespace": NS, "pushgateway": "http://127.0.0.1:9", "start_delay_seconds": 5}
SECRET_HEADER = "Bearer very-secret-token"

pytestmark = pytest.mark.timeout(180)


def _job_of(cluster: EmulatorHandle, load_id: str) -> dict[str, Any] | None:
    return cluster.get("Job", NS, f"gameday-load-{load_id}")


def _pods(cluster: EmulatorHandle, load_id: str) -> list[dict[str, Any]]:
    return [
        p
        for p in cluster.items("Pod", NS)
        if p["metadata"]["labels"].get("gameday.io/load") == load_id
    ]


def _start(**extra: Any) -> dict[str, Any]:
    return drive_http_load(
        urls=["http://web.shop.svc:8080/"],
        rate=90,
        duration_seconds=20,
        replicas=3,
        kubernetes=KUBE,
        headers={"Authorization": SECRET_HEADER},
        name="from-pods",
        **extra,
    )


def test_the_job_is_indexed_validated_and_carries_no_secret(
    emulator: EmulatorHandle, ledger_path: Path
) -> None:
    started = _start()
    load_id = started["ledger_id"]
    job, secret = _job_of(emulator, load_id), emulator.get("Secret", NS, f"gameday-load-{load_id}")
    assert job is not None and secret is not None
    for doc in (job, secret):
        clean = {k: v for k, v in doc.items() if k != "status"}
        clean["metadata"] = {k: doc["metadata"][k] for k in ("name", "namespace", "labels")}
        for version in K8S_VERSIONS:
            kubernetes_validate.validate(clean, version, strict=True)
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 3, 3)
    assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] > 20
    container = spec["template"]["spec"]["containers"][0]
    assert container["image"] == _job.DEFAULT_IMAGE == started["image"]
    assert container["command"] == ["python", "-m", "chaos_ext.load._pod"]
    assert SECRET_HEADER not in json.dumps(job)  # the header is in the Secret only
    payload = json.loads(secret["stringData"][_job.SPEC_KEY])
    assert payload["headers"] == {"Authorization": SECRET_HEADER}
    assert payload["shard_count"] == 3 and payload["concurrency_limit"] == 22  # ceil(64 / 3)
    assert abs(payload["start_at"] - started["start"]) < 1e-6
    # the emulator's Job controller made one pod per completion index
    wait_for(lambda: len(_pods(emulator, load_id)) == 3, 10, "the Job's 3 pods")
    indexes = sorted(
        p["metadata"]["annotations"][_job_index_key()] for p in _pods(emulator, load_id)
    )
    assert indexes == ["0", "1", "2"]
    (entry,) = Ledger(ledger_path).open_entries()
    assert entry.recipe["mode"] == "kubernetes" and SECRET_HEADER not in json.dumps(entry.recipe)

    stopped = stop_http_load(ledger_id=load_id)
    assert stopped["undone"] == 1 and "foreground" in stopped["faults"][0]["note"]
    assert ("job-delete", f"{NS}/gameday-load-{load_id} Foreground") in [
        e[1:] for e in emulator.events("job-delete")
    ]
    assert _job_of(emulator, load_id) is None and _pods(emulator, load_id) == []
    assert emulator.get("Secret", NS, f"gameday-load-{load_id}") is None
    assert Ledger(ledger_path).open_entries() == []


def _job_index_key() -> str:
    return "batch.kubernetes.io/job-completion-index"


def test_the_image_is_the_one_gameday_schedule_describes(
    emulator: EmulatorHandle, ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_job.IMAGE_ENV, "registry.example.com/gameday:0.1.0")
    started = _start()
    job = _job_of(emulator, started["ledger_id"])
    assert job is not None
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "registry.example.com/gameday:0.1.0"
    )
    stop_http_load(ledger_id=started["ledger_id"])


@pytest.mark.parametrize(
    ("replicas", "kubernetes", "match"),
    [
        (3, None, "pushgateway"),
        (0, KUBE, "replicas"),
        (501, KUBE, "replicas"),
        (2, {**KUBE, "pushgateway": "pushgateway.monitoring:9091"}, "pushgateway"),
        (2, {**KUBE, "namespace": "Bad_NS"}, "namespace"),
        (2, {**KUBE, "nodes": 3}, "unknown"),
        (2, {**KUBE, "cpu": "lots"}, "cpu"),
        (2, {**KUBE, "start_delay_seconds": 0}, "start_delay_seconds"),
    ],
)
def test_bad_job_settings_are_refused_before_anything_is_created(
    emulator: EmulatorHandle, ledger_path: Path, replicas: int, kubernetes: Any, match: str
) -> None:
    with pytest.raises(InvalidArgument, match=match):
        drive_http_load(
            urls=["http://web:8080/"], rate=10, replicas=replicas, kubernetes=kubernetes
        )
    assert emulator.items("Job", NS) == [] and emulator.items("Secret", NS) == []
    assert not ledger_path.exists() or Ledger(ledger_path).history() == []


def _experiment() -> dict[str, Any]:
    return {
        "title": "load from three pods, runner killed",
        "description": "gameday rollback must delete the Job",
        "method": [
            {
                "type": "action",
                "name": "load-from-pods",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.load.actions",
                    "func": "drive_http_load",
                    "arguments": {
                        "urls": ["http://web.shop.svc:8080/"],
                        "rate": 30,
                        "duration_seconds": 60,
                        "replicas": 3,
                        "kubernetes": KUBE,
                    },
                },
            },
            {
                "type": "probe",
                "name": "wait",
                "provider": {"type": "process", "path": "sleep", "arguments": "90", "timeout": 120},
            },
        ],
        "rollbacks": [
            {
                "type": "action",
                "name": "stop-the-load",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.load.actions",
                    "func": "stop_http_load",
                    "arguments": {},
                },
            },
        ],
    }


@pytest.mark.undoes("http-load")
def test_sigkill_of_the_runner_then_gameday_rollback_deletes_the_job(
    emulator: EmulatorHandle,
    ledger_path: Path,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    path = write_experiment(_experiment())
    runner = subprocess.Popen(
        gameday_argv("run", "--journal", str(tmp_path / "journal.json"), str(path)),
        env=cli_env(ledger_path),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: len(emulator.items("Job", NS)) == 1, 90, "the run's Job")
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)
    (job,) = emulator.items("Job", NS)
    wait_for(lambda: len(emulator.items("Pod", NS)) == 3, 10, "the Job's pods")
    result = gameday("rollback")
    assert result.returncode == 0, result.stdout + result.stderr
    assert emulator.items("Job", NS) == [] and emulator.items("Pod", NS) == []
    assert emulator.items("Secret", NS) == []
    assert [e[2] for e in emulator.events("job-delete")] == [
        f"{NS}/{job['metadata']['name']} Foreground"
    ]
    assert Ledger(ledger_path).open_entries() == []


def _granted(rules: Any, verb: str, group: str, resource: str) -> bool:
    return any(r.api_group == group and r.resource == resource and verb in r.verbs for r in rules)


def test_the_derived_role_permits_every_call_the_load_made_and_only_when_used(
    emulator: EmulatorHandle, ledger_path: Path
) -> None:
    started = _start()
    stop_http_load(ledger_id=started["ledger_id"])
    calls = {tuple(call.split()[:2]) for call in emulator.api_calls()}
    assert ("create", "batch/jobs") in calls and ("delete", "batch/jobs") in calls
    perms = permissions_of([_experiment()])
    for verb, what in calls:
        group, _, resource = what.partition("/")
        assert _granted(perms.rules, verb, group, resource), (verb, what, perms.rules)
    local = _experiment()
    arguments = local["method"][0]["provider"]["arguments"]
    del arguments["replicas"], arguments["kubernetes"]
    assert permissions_of([local]).rules == ()
    templated = _experiment()
    templated["method"][0]["provider"]["arguments"]["replicas"] = "${replicas}"
    assert permissions_of([templated]).rules == permissions_of([_experiment()]).rules


def test_a_load_killed_before_its_job_existed_says_so(
    emulator: EmulatorHandle,
    ledger_path: Path,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """Issue 27, item 5: no "deleted Job ... already gone: Job" for a Job that never was."""
    path = write_experiment(_experiment())
    killed = subprocess.run(
        gameday_argv("run", "--journal", str(tmp_path / "journal.json"), str(path)),
        env={**cli_env(ledger_path), "GAMEDAY_FAILPOINTS": "http-load.after-entry=kill"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    (entry,) = Ledger(ledger_path).open_entries()
    assert emulator.items("Job", NS) == [] and emulator.items("Secret", NS) == []
    result = gameday("rollback")
    assert result.returncode == 0, result.stdout + result.stderr
    said = " ".join((result.stdout + result.stderr).split())
    name = f"{NS}/gameday-load-{entry.id}"
    assert (
        f"nothing to delete: Job and Secret {name} were never created: the load was stopped"
        " before it started"
    ) in said, said
    assert "deleted Job" not in said and "already gone" not in said
    assert Ledger(ledger_path).open_entries() == []


@pytest.mark.parametrize(
    ("job", "secret", "retried", "note"),
    [
        (True, True, False, "deleted Job ns/j (foreground: its pods first) and its Secret"),
        (
            True,
            False,
            False,
            "deleted Job ns/j (foreground: its pods first); its Secret was never created",
        ),
        (
            False,
            True,
            False,
            "deleted Secret ns/j; its Job was never created: the load was stopped"
            " before it started",
        ),
        (
            False,
            True,
            True,
            "deleted Secret ns/j; its Job was already deleted by an earlier undo attempt",
        ),
        (
            False,
            False,
            True,
            "nothing to delete: Job and Secret ns/j were already deleted by an"
            " earlier undo attempt",
        ),
    ],
)
def test_the_undo_note_says_what_was_deleted_and_why_the_rest_was_not_there(
    job: bool, secret: bool, retried: bool, note: str
) -> None:
    assert _distributed.deleted_note("ns/j", job=job, secret=secret, retried=retried) == note
