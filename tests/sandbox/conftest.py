"""A sandbox per test module, with its own prefix, ledger and state directory."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.sandbox import sandbox_cli


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A running fragile sandbox (netns backend): (prefix, state folder)."""
    prefix = "t" + uuid.uuid4().hex[:5]
    state = tmp_path_factory.mktemp("sandbox")
    up = sandbox_cli(prefix, state, "up", "--backend", "netns")
    assert up.returncode == 0, up.stderr
    yield prefix, state
    down = sandbox_cli(prefix, state, "down")
    assert down.returncode == 0, down.stderr
