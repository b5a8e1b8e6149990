"""Reading journal files for reports: JSON, redacted (pure but for :func:`load_journal`)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from chaos_ext._runner.redact import Redactor
from chaos_ext.errors import JournalError

__all__ = ["inline_secrets", "load_journal", "redact_journal"]


def inline_secrets(secrets: Any) -> Iterator[str]:
    """Literal secret values in an experiment's ``secrets`` (not env/vault references)."""
    if isinstance(secrets, Mapping):
        if secrets.get("type") in ("env", "vault") and "key" in secrets:
            return
        for value in secrets.values():
            yield from inline_secrets(value)
    elif isinstance(secrets, list | tuple):
        for value in secrets:
            yield from inline_secrets(value)
    elif isinstance(secrets, str) and len(secrets) >= 3:
        yield secrets


def redact_journal(journal: Mapping[str, Any], extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """A copy with the experiment's literal secrets and secret-named keys masked."""
    experiment = journal.get("experiment") or {}
    redactor = Redactor([*inline_secrets(experiment.get("secrets")), *extra])
    clean: dict[str, Any] = redactor.value(journal)
    return clean


def load_journal(path: Path, extra_secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """Read a journal file (JSON), redacted."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise JournalError(f"{path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise JournalError(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("experiment"), dict):
        raise JournalError(f"{path}: not a Chaos Toolkit journal (no 'experiment' object)")
    return redact_journal(data, extra_secrets)
