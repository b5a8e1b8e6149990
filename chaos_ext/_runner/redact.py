"""Keep secrets out of journals, logs and reports.

Secret values loaded for a run are replaced by ``***`` wherever they appear in
a string; keys that name secrets (password, token, ...) have their values
replaced too.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MASK", "Redactor", "secret_values"]

MASK = "***"
_SECRET_KEY = re.compile(r"(pass(word)?|secret|token|api[_-]?key|private[_-]?key|credential)", re.I)
_MIN_LEN = 3


def secret_values(secrets: Mapping[str, Any] | None) -> list[str]:
    """Every string value in a Chaos Toolkit ``secrets`` mapping (any depth)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for v in value.values():
                walk(v)
        elif isinstance(value, list | tuple):
            for v in value:
                walk(v)
        elif isinstance(value, str) and len(value) >= _MIN_LEN:
            found.append(value)

    walk(secrets or {})
    return found


class Redactor(logging.Filter):
    """Replaces known secret values; also usable as a logging filter."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        super().__init__()
        self.values: list[str] = []
        self.add(values)

    def add(self, values: Iterable[str]) -> None:
        self.values = sorted({*self.values, *values}, key=len, reverse=True)

    def text(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def value(self, obj: Any, key: str | None = None) -> Any:
        """A redacted copy of a JSON-like value."""
        if isinstance(obj, Mapping):
            return {k: self.value(v, str(k)) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.value(v, key) for v in obj]
        if isinstance(obj, str):
            if key and _SECRET_KEY.search(key) and obj and not obj.startswith("${"):
                return MASK
            return self.text(obj)
        return obj

    def filter(self, record: logging.LogRecord) -> bool:
        if self.values:
            record.msg = self.text(record.getMessage())
            record.args = None
        return True
