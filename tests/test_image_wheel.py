"""The runner image's wheel, built from exactly the files deploy/Dockerfile copies.

The image is built with `docker build -f deploy/Dockerfile .`; its build stage
copies a few paths and runs `pip install .` on them. When the probe catalog was
a link from the package to the top-level probes/ (which the Dockerfile does not
copy), that wheel had no catalog and `gameday validate
experiments/prometheus-edge-slo.json` failed in the image. No Docker engine is
available here, so this test does what the build stage does: it reads the
Dockerfile's COPY lines, copies exactly those paths as Docker copies them
(links stay links), builds the wheel from them, and runs the CLI from that
wheel alone, outside the checkout.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.harness import ROOT

pytestmark = pytest.mark.timeout(300)

DOCKERFILE = ROOT / "deploy" / "Dockerfile"
EXPERIMENT = ROOT / "experiments" / "prometheus-edge-slo.json"


def _build_stage_copies(text: str) -> list[tuple[list[str], str]]:
    """``(sources, destination)`` of each COPY of the first stage (continuations joined)."""
    lines = text.replace("\\\n", " ").splitlines()
    stages = [i for i, line in enumerate(lines) if line.split()[:1] == ["FROM"]]
    copies = []
    for line in lines[stages[0] : stages[1]]:
        words = shlex.split(line, comments=True)
        if words[:1] == ["COPY"] and not any(w.startswith("--") for w in words):
            copies.append((words[1:-1], words[-1]))
    return copies


def _copy_as_docker_does(sources: list[str], destination: str, context: Path) -> None:
    """COPY SRC... DEST: a file into DEST (a folder when it ends with /), a folder's content
    into DEST; symbolic links are copied as links, as Docker copies them."""
    for source in sources:
        origin = ROOT / source
        target = context / destination
        if origin.is_dir() and not origin.is_symlink():
            shutil.copytree(
                origin,
                target,
                symlinks=True,
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
        else:
            target = target / origin.name if destination.endswith("/") else target
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, target, follow_symlinks=False)


def test_the_wheel_of_the_dockerfile_files_has_the_catalog_and_validates_the_edge_experiment(
    tmp_path: Path,
) -> None:
    copies = _build_stage_copies(DOCKERFILE.read_text())
    assert ["chaos_ext"] in [sources for sources, _ in copies], copies
    context = tmp_path / "src"
    context.mkdir()
    for sources, destination in copies:
        _copy_as_docker_does(sources, destination, context)
    assert not (context / "probes").exists()  # the Dockerfile does not copy the top-level link

    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(context)],
        cwd=tmp_path,
        capture_output=True,
        timeout=240,
        check=True,
    )
    (wheel,) = dist.glob("chaos_ext-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    catalog = {n for n in names if n.startswith("chaos_ext/prometheus/catalog/")}
    assert {
        f"chaos_ext/prometheus/catalog/{n}.yaml"
        for n in ("http", "dns", "db", "abort/edge", "findings/incidents")
    } <= catalog, sorted(names)

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "GAMEDAY_PROBE_CATALOG"}
    env.update(PYTHONPATH=str(site), HOME=str(tmp_path), GAMEDAY_LEDGER=str(tmp_path / "l.db"))

    def gameday(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "chaos_ext.cli.main", *args]
        return subprocess.run(
            argv, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120, check=False
        )

    validated = gameday("validate", str(EXPERIMENT))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert f"valid: {EXPERIMENT}" in validated.stderr
    listing = gameday("catalog", "--json")
    assert listing.returncode == 0, listing.stderr
    assert f'"source": "{site}/chaos_ext/prometheus/catalog/http.yaml"' in listing.stdout
    assert '"edge"' in listing.stdout
