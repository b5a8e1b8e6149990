"""Play the kubelet for the emulator's pods: run their container command here, as processes.

The emulator stores pods but runs nothing. For a load Job, the test takes
each pod the emulator's Job controller created and starts its container's
``command`` on this machine with the container's ``env`` resolved the way the
kubelet resolves it: plain values, ``secretKeyRef`` (from the emulator's
Secret, ``stringData`` or base64 ``data``) and ``fieldRef`` on the pod's
annotations (``JOB_COMPLETION_INDEX``). ``python`` is this interpreter. So
what runs is exactly what the Job describes, not a copy of it.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.k8s_emulator import EmulatorHandle

__all__ = ["pod_env", "run_pods"]

ROOT = Path(__file__).resolve().parents[2]
_ANNOTATION = re.compile(r"^metadata\.annotations\['(?P<key>[^']+)'\]$")


def _secret_value(cluster: EmulatorHandle, ns: str, ref: dict[str, str]) -> str:
    secret = cluster.get("Secret", ns, ref["name"])
    assert secret is not None, f"Secret {ns}/{ref['name']} missing: the pod could not start"
    if ref["key"] in (secret.get("stringData") or {}):
        return str(secret["stringData"][ref["key"]])
    return base64.b64decode(secret["data"][ref["key"]]).decode()


def pod_env(cluster: EmulatorHandle, pod: dict[str, Any]) -> dict[str, str]:
    """The first container's environment as the kubelet would set it."""
    ns = pod["metadata"]["namespace"]
    env: dict[str, str] = {}
    for item in pod["spec"]["containers"][0].get("env", []):
        source = item.get("valueFrom")
        if source is None:
            env[item["name"]] = item["value"]
        elif "secretKeyRef" in source:
            env[item["name"]] = _secret_value(cluster, ns, source["secretKeyRef"])
        else:
            match = _ANNOTATION.match(source["fieldRef"]["fieldPath"])
            assert match, f"unsupported fieldRef {source}"
            env[item["name"]] = pod["metadata"]["annotations"][match["key"]]
    return env


def run_pods(
    cluster: EmulatorHandle, ns: str, label: str, workdir: Path
) -> list[subprocess.Popen[bytes]]:
    """Start every pod of ``ns`` carrying ``label`` (``key=value``) as a local process."""
    key, _, value = label.partition("=")
    pods = [p for p in cluster.items("Pod", ns) if p["metadata"]["labels"].get(key) == value]
    procs = []
    for pod in pods:
        command = list(pod["spec"]["containers"][0]["command"])
        if command[0] == "python":
            command[0] = sys.executable
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            **pod_env(cluster, pod),
            "TMPDIR": str(workdir),
        }
        log = (workdir / f"{pod['metadata']['name']}.log").open("wb")
        procs.append(subprocess.Popen(command, env=env, cwd=workdir, stdout=log, stderr=log))
    return procs
