"""Where a sandbox keeps its state, so `down` and `status` work from any process."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from chaos_ext._core.ledger import ledger_path

__all__ = ["SandboxState", "load_state", "save_state", "state_dir"]


def state_dir(prefix: str) -> Path:
    """``<ledger folder>/sandbox/<prefix>``: logs, data, the password file, state.json."""
    override = os.environ.get("GAMEDAY_SANDBOX_DIR")
    base = Path(override) if override else ledger_path().parent / "sandbox"
    return base / prefix


@dataclass
class SandboxState:
    """What one sandbox runs: its backend, services (pid, namespace, address, port)."""

    prefix: str
    backend: str
    app_mode: str
    created_at: float
    services: dict[str, dict[str, Any]] = field(default_factory=dict)
    dirs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def save_state(state: SandboxState) -> Path:
    path = state_dir(state.prefix) / "state.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state), indent=2))
    tmp.replace(path)
    return path


def load_state(prefix: str) -> SandboxState | None:
    path = state_dir(prefix) / "state.json"
    try:
        return SandboxState(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
