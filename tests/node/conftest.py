"""Fixtures for node drain tests: an emulated node pool behind the real client."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import k8s_objects as o
from support.k8s_emulator import EmulatorHandle, emulator  # noqa: F401 - the fixture

POOL = {"role": "eat-workers"}


@pytest.fixture(autouse=True)
def _isolated_ledger(ledger_path: Path) -> Path:
    return ledger_path


@pytest.fixture
def pool(emulator: EmulatorHandle) -> list[str]:  # noqa: F811 - the imported fixture
    """Three Ready worker nodes labelled role=eat-workers, plus one system node."""
    names = [f"worker-{i}" for i in range(3)]
    emulator.put([o.node(n, POOL) for n in names], o.node("system-0", {"role": "system"}))
    return names
