"""A run's findings for the report: cause, fix and proof of each deviation (``_products.findings``).

The rules come from ``probes/findings/`` and ``$GAMEDAY_FINDINGS``; a rule file gameday
cannot use gives no finding and says why, and the rest of the report stands.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chaos_ext._products.findings import Finding, findings_of, load_rules
from chaos_ext.errors import FindingRulesError

__all__ = ["findings_part", "findings_summary"]


def findings_part(journal: Mapping[str, Any], source: str) -> dict[str, Any]:
    """``{"findings": (...), "findings_error": ""}`` for ``model.view_of``."""
    try:
        return {"findings": tuple(findings_of(journal, load_rules(), source)), "findings_error": ""}
    except FindingRulesError as exc:
        return {"findings": (), "findings_error": str(exc)}


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def findings_summary(findings: list[Finding]) -> str:
    """``4 findings: 3 with a cause and a fix, 1 cause unknown`` (a number agrees with its word)."""
    if not findings:
        return "no findings: no hypothesis deviated"
    known = sum(1 for f in findings if f.known)
    parts = [f"{known} with a cause and a fix"] if known else []
    if len(findings) - known:
        parts.append(f"{len(findings) - known} cause unknown")
    return f"{_count(len(findings), 'finding')}: {', '.join(parts)}"
