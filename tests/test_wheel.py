"""Installed, not only checked out: the wheel works from a fresh venv outside the repository.

The source tree is copied (so the checkout gets no build/ or egg-info), built
into a wheel, and installed with its dependencies into a new virtual
environment. Every command then runs from a directory that is not the
checkout, with a clean environment (no PYTHONPATH), so only the installed
package can answer.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from support.harness import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

TEST_ONLY = ("http_target", "mariadb", "nginx", "sshd")
SANDBOX_ONLY = {"bcrypt", "psycopg-pool"}
CATALOG_PROBES = {"http-error-ratio", "http-latency-p99", "nodes-not-ready", "targets-up"}
UPSTREAM_ENVOY = Path(__file__).parent / "envoy" / "fixtures" / "upstream"


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    result = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, f"{argv}: {result.stdout[-3000:]}{result.stderr[-3000:]}"
    return result.stdout + result.stderr


def _experiment(name: str) -> dict[str, Any]:
    probe = {
        "type": "probe",
        "name": "error-ratio",
        "tolerance": {"type": "range", "range": [0, 0.01]},
        "provider": {
            "type": "python",
            "module": "chaos_ext.prometheus.probes",
            "func": "catalog_probe",
            "arguments": {"name": name, "parameters": {"job": "checkout"}},
        },
    }
    return {
        "title": "catalog probe from an installed wheel",
        "description": "validate only",
        "configuration": {"prometheus_url": "http://127.0.0.1:9"},
        "steady-state-hypothesis": {"title": "few errors", "probes": [probe]},
        "method": [{**probe, "name": "again"}],
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv",
            ".git",
            "build",
            "*.egg-info",
            "reports",
            "__pycache__",
            ".mypy_cache",
            ".ruff_cache",
            "*.log",
        ),
    )
    dist = work / "dist"
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
        work,
        dict(os.environ),
    )
    (built,) = dist.glob("chaos_ext-*.whl")
    return built


def test_the_wheel_ships_data_not_test_servers(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"chaos_ext/prometheus/catalog/{n}.yaml" for n in ("http", "dns", "db")} <= names
    assert "chaos_ext/prometheus/catalog/abort/edge.yaml" in names
    assert "chaos_ext/prometheus/catalog/findings/incidents.yaml" in names  # the finding rules
    profiles = {f"chaos_ext/envoy/profiles/{n}.yaml" for n in ("envoy-edge", "hardened", "sidecar")}
    assert profiles <= names
    assert "chaos_ext/_products/report/templates/report.html.j2" in names
    assert not [n for n in names if n.startswith("tests/") or n.startswith("probes/")]
    assert not [n for n in names if any(f"sandbox/servers/{s}.py" in n for s in TEST_ONLY)]
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    requires = [
        line
        for line in zipfile.ZipFile(wheel).read(metadata).decode().splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    assert requires and not [r for r in requires if "aiohttp" in r], requires
    runtime = {
        re.split(r"[\s\[<>=!;(]", r.removeprefix("Requires-Dist:").strip(), maxsplit=1)[0]
        for r in requires
    }
    # sandbox-only libraries come with chaos_ext[sandbox], never with chaos_ext (issue #28)
    assert not runtime & SANDBOX_ONLY, runtime & SANDBOX_ONLY
    extra = [
        line
        for line in zipfile.ZipFile(wheel).read(metadata).decode().splitlines()
        if line.startswith("Requires-Dist:") and 'extra == "sandbox"' in line
    ]
    assert {name for name in SANDBOX_ONLY if any(name in line for line in extra)} == SANDBOX_ONLY, (
        extra
    )


def test_installed_wheel_runs_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, dict(os.environ))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        COLUMNS="200",
        GAMEDAY_LEDGER=str(tmp_path / "ledger.sqlite3"),
    )
    env.pop(CATALOG := "GAMEDAY_PROBE_CATALOG", None)
    _run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], tmp_path, env, timeout=1200)
    env["HOME"] = str(tmp_path)  # no ~/.chaostoolkit settings of this machine
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert not (elsewhere / "chaos_ext").exists() and CATALOG not in env

    probe = "import chaos_ext; print(chaos_ext.__file__)"
    where = _run([str(venv / "bin" / "python"), "-c", probe], elsewhere, env)
    assert where.strip().startswith(str(venv)), where
    assert _run(["gameday", "--version"], elsewhere, env).strip() == "gameday 0.1.0"

    (elsewhere / "ok.json").write_text(json.dumps(_experiment("http-error-ratio")))
    assert "valid:" in _run(["gameday", "validate", "ok.json"], elsewhere, env)
    (elsewhere / "typo.json").write_text(json.dumps(_experiment("http-eror-ratio")))
    typo = subprocess.run(
        ["gameday", "validate", "typo.json"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert typo.returncode == 3, typo.stdout + typo.stderr
    assert "did you mean http-error-ratio" in " ".join((typo.stdout + typo.stderr).split())

    listing = json.loads(_run(["gameday", "catalog", "--json"], elsewhere, env))
    names = {p["name"] for p in listing["probes"]}
    assert names >= CATALOG_PROBES, names
    assert all(p["source"].startswith(str(venv)) for p in listing["probes"])
    assert set(listing["abort_plans"]) >= {"edge"}

    example = UPSTREAM_ENVOY / "envoy-edge-example-02a45cb9.yaml"  # profiles load from the wheel
    audit = subprocess.run(
        ["gameday", "audit", "envoy", "--source", str(example), "--profile", "hardened"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert audit.returncode == 1 and "request-headers-timeout" in audit.stdout, audit.stderr

    _run(
        [
            "chaos",
            "discover",
            "--no-install",
            "--no-system-info",
            "--discovery-path",
            "discovery.json",
            "chaos_ext",
        ],
        elsewhere,
        env,
    )
    activities = json.loads((elsewhere / "discovery.json").read_text())["activities"]
    assert len(activities) >= 38
    assert not [
        (a["name"], arg["name"])
        for a in activities
        for arg in a["arguments"]
        if arg.get("type") in (None, "object")
    ]
