"""Shared fixtures: an isolated ledger per test and a way to run the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import vm_lane
from support.harness import cli_env, gameday_argv, netns_list, wait_for

__all__ = ["cli_env", "gameday_argv", "netns_list", "wait_for"]  # re-exported for old imports


_BY_KIND = {"--undoes": "undoes", "--rolls-back": "rolls_back"}


def pytest_addoption(parser: pytest.Parser) -> None:
    """The mutation check's selections (tests/test_mutation.py): the tests that prove a kind."""
    for option, marker in _BY_KIND.items():
        parser.addoption(
            option,
            default="",
            metavar="KIND",
            help=f"run only the tests marked {marker}(KIND) (the mutation check's selection)",
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With ``--undoes KIND`` / ``--rolls-back KIND``: keep only the tests marked for KIND."""
    for option, marker in _BY_KIND.items():
        wanted = config.getoption(option)
        if not wanted:
            continue
        keep = [i for i in items if any(m.args[:1] == (wanted,) for m in i.iter_markers(marker))]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the VM lane in the background if this session runs it (support/vm_lane.py)."""
    if session.config.option.collectonly or os.environ.get("GAMEDAY_IN_VM") == "1":
        return
    if shutil.which("qemu-system-x86_64") and any(
        item.nodeid == vm_lane.LANE_TEST for item in session.items
    ):
        vm_lane.start()


@pytest.fixture(autouse=True, scope="session")
def _ledger_markers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Ledger markers of every test go to one temporary folder, not to ~/.local/state."""
    folder = tmp_path_factory.mktemp("ledger-markers")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GAMEDAY_LEDGER_MARKERS", str(folder))
        yield folder


@pytest.fixture
def ledger_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh fault ledger for this test (GAMEDAY_LEDGER), with its own markers folder.

    Sweeps read every ledger the markers name (docs/ledger.md, ownership by
    identity): another test's damaged or open ledger must not be among them.
    """
    path = tmp_path / "ledger.sqlite3"
    monkeypatch.setenv("GAMEDAY_LEDGER", str(path))
    monkeypatch.setenv("GAMEDAY_LEDGER_MARKERS", str(tmp_path / "ledger-markers"))
    return path


@pytest.fixture
def gameday(ledger_path: Path, tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the real ``gameday`` CLI in a subprocess against the test's ledger."""

    def run(
        *args: str, timeout: float = 120, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            gameday_argv(*args),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=cli_env(ledger_path),
            cwd=tmp_path,
            check=False,
        )

    return run


@pytest.fixture
def write_experiment(tmp_path: Path) -> Callable[[dict[str, Any], str], Path]:
    def write(experiment: dict[str, Any], name: str = "experiment.json") -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(experiment, indent=2))
        return path

    return write


@pytest.fixture
def netns_name() -> Iterator[str]:
    """A unique namespace name; the test fails if it is left behind."""
    name = f"gdt-{uuid.uuid4().hex[:8]}"
    yield name
    if name in netns_list():
        subprocess.run(["ip", "netns", "delete", name], check=False, timeout=10)
        pytest.fail(f"namespace {name} was left behind")
