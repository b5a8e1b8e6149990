"""Findings: for each deviated run, the cause its evidence supports, one fix, and its proof.

Pure: a journal (with its ``gameday.timeline``) and the rules in, findings out. The
rules are data beside the probe catalog (:mod:`.rules`); the evidence is what the
journal shows (:mod:`.evidence`); :mod:`.evaluate` matches them, and says
"cause unknown" with what to measure next when no rule's evidence holds. The report
(report.html, summary.md) and ``gameday advise --journal`` show the same findings.
"""

from __future__ import annotations

from chaos_ext._products.findings.evaluate import (
    CAUSE_UNKNOWN,
    Finding,
    findings_of,
    findings_of_journals,
)
from chaos_ext._products.findings.rules import FINDINGS_ENV, Rule, load_rules, rule_files

__all__ = [
    "CAUSE_UNKNOWN",
    "FINDINGS_ENV",
    "Finding",
    "Rule",
    "findings_of",
    "findings_of_journals",
    "load_rules",
    "rule_files",
]
