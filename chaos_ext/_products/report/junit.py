"""JUnit XML for CI systems (Jenkins, GitLab, GitHub Actions test reporters).

One ``<testsuite>`` per run. Its test cases:

- ``<probe> [before|during|after]``: one per hypothesis probe per phase
  (``during`` only when the run checked the hypothesis during the method). A
  value out of tolerance is a ``<failure>`` whose message carries the measured
  value against the tolerance; a probe that raised is an ``<error>``; a probe
  the run never reached is ``<skipped>``.
- ``steady state held``: failure when the run deviated, error when it failed,
  was aborted (a stop condition) or interrupted, was not run (an earlier
  experiment of the batch was stopped: ``NotRun`` with the reason), or was
  unsteady (the steady state did not hold before the method: nothing was
  injected, nothing proven).

A run that went without a safety control (``--allow-missing-controls``) has
the suite property ``unprotected`` naming it.
- ``faults rolled back``: error ``RollbackIncomplete`` when a rollback failed
  or a fault stayed open, naming what may still be injected and the command
  that retries the undo.

With a minimum score, a ``gameday.score`` suite holds one case,
``resilience score >= N``, failed when the score is below.
"""

from __future__ import annotations

import re
import socket
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field

from chaos_ext._core.timeline import figure_text
from chaos_ext._products.report.model import Check, RunView, retry_commands, unsteady_text
from chaos_ext._products.report.score import Score
from chaos_ext._products.report.tables import tolerance_text, value_text
from chaos_ext._runner.verdict import OUTCOME_TEXT

__all__ = ["Case", "junit_xml", "suite_cases"]

_CHECKED_ALWAYS = ("before", "after")


@dataclass
class Case:
    """One test case and its outcome (kind: failure | error | skipped | None)."""

    name: str
    classname: str
    seconds: float = 0.0
    kind: str | None = None
    type: str = ""
    message: str = ""
    details: list[str] = field(default_factory=list)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-").lower()[:80] or "experiment"


def _seconds(checks: Sequence[Check]) -> float:
    return sum(max(0.0, (c.end or 0.0) - (c.start or 0.0)) for c in checks if c.start and c.end)


def _measured(check: Check, origin: float | None) -> str:
    """``measured <the figure its tolerance judges> at +t s, tolerance ...``."""
    at = f" at +{check.end - origin:.1f} s" if check.end and origin else ""
    figure = figure_text(check.output, check.tolerance) or value_text(check.output)
    return f"measured {figure}{at}, tolerance {tolerance_text(check.tolerance)}"


def _probe_case(view: RunView, probe: str, phase: str, classname: str) -> Case:
    checks = view.checks_for(probe, phase)
    case = Case(f"{probe} [{phase}]", classname, _seconds(checks))
    errors = [c for c in checks if c.status == "failed"]
    misses = [c for c in checks if c.status != "failed" and c.met is False]
    if not checks:
        case.kind, case.type = "skipped", "NotEvaluated"
        case.message = (
            f"not evaluated {phase} the method (the run stopped or an earlier probe failed)"
        )
    elif errors:
        case.kind, case.type = "error", "ProbeError"
        case.message = f"probe raised: {errors[0].error or 'unknown error'}"
        case.details = [f"{c.error}" for c in errors]
    elif misses:
        case.kind, case.type = "failure", "ToleranceNotMet"
        first = _measured(misses[0], view.start)
        share = (
            f"{len(misses)} of {len(checks)} checks out of tolerance; " if len(checks) > 1 else ""
        )
        case.message = f"{share}{first}"
        case.details = [_measured(c, view.start) for c in misses]
    return case


def _verdict_case(view: RunView, classname: str) -> Case:
    case = Case("steady state held", classname, view.duration or 0.0)
    outcome = view.hypothesis_outcome or view.outcome
    if outcome == "unsteady":
        case.kind, case.type = "error", "Unsteady"
        case.message = (
            f"unsteady: {OUTCOME_TEXT['unsteady']} ({unsteady_text(view)}); nothing was proven"
        )
    elif view.outcome == "not-recovered":
        case.kind, case.type = "failure", "NotRecovered"
        case.message = OUTCOME_TEXT["not-recovered"]
        case.details = list(view.notes)
    elif outcome == "deviated":
        case.kind, case.type = "failure", "Deviated"
        case.message = "the steady-state hypothesis was not met"
        case.details = [
            f"{c.probe} [{c.phase}]: {_measured(c, view.start)}"
            for c in view.checks
            if c.met is False
        ]
    elif outcome != "held":
        case.kind = "error"
        case.type = "".join(part.capitalize() for part in outcome.split("-"))  # NotRun
        reason = (
            view.not_run
            or view.abort_text
            or view.error
            or (f"activity failed: {'; '.join(view.failures)}" if view.failures else "")
        )
        case.message = f"run {outcome}" + (f": {reason}" if reason else "")
        case.details = list(view.notes)
    return case


def _rollback_case(view: RunView, classname: str) -> Case:
    case = Case("faults rolled back", classname)
    problems = list(view.rollback_problems)
    if problems:
        case.kind, case.type = "error", "RollbackIncomplete"
        case.message = f"a fault may still be injected: {problems[0]}"
        case.details = [*problems, *(f"retry: {c}" for c in retry_commands(view))]
    return case


def suite_cases(view: RunView) -> list[Case]:
    """The test cases of one run."""
    classname = f"gameday.{_slug(view.title)}"
    phases = [*_CHECKED_ALWAYS]
    if any(c.phase == "during" for c in view.checks):
        phases.insert(1, "during")
    cases = [
        _probe_case(view, probe, phase, classname)
        for probe in view.hypothesis_probes
        for phase in phases
    ]
    return [*cases, _verdict_case(view, classname), _rollback_case(view, classname)]


def _case_element(case: Case) -> ET.Element:
    element = ET.Element("testcase", name=case.name, classname=case.classname)
    element.set("time", f"{case.seconds:.3f}")
    if case.kind:
        child = ET.SubElement(element, case.kind, message=case.message, type=case.type)
        child.text = "\n".join(case.details) or case.message
    return element


def _suite(name: str, cases: list[Case], seconds: float, props: dict[str, str]) -> ET.Element:
    suite = ET.Element("testsuite", name=name)
    suite.set("tests", str(len(cases)))
    for key, kind in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
        suite.set(key, str(sum(c.kind == kind for c in cases)))
    suite.set("time", f"{seconds:.3f}")
    suite.set("timestamp", time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()))
    suite.set("hostname", socket.gethostname())
    properties = ET.SubElement(suite, "properties")
    for key, value in props.items():
        ET.SubElement(properties, "property", name=key, value=value)
    suite.extend(_case_element(c) for c in cases)
    return suite


def _score_cases(score: Score, minimum: float) -> list[Case]:
    case = Case(f"resilience score >= {minimum:g}", "gameday.score")
    if score.value is None or score.value < minimum:
        case.kind, case.type = "failure", "ScoreTooLow"
        case.message = f"resilience score {score.text()}, minimum {minimum:g}"
    return [case]


def junit_xml(
    views: Sequence[RunView],
    score: Score,
    min_score: float | None = None,
    extra: Sequence[tuple[str, list[Case], dict[str, str]]] = (),
) -> bytes:
    """The JUnit XML document (UTF-8) for ``views`` (and ``extra`` suites:
    name, cases, properties)."""
    root = ET.Element("testsuites", name="gameday")
    for view in views:
        props = {"outcome": view.outcome, "run_id": view.run_id, "journal": view.source}
        if view.unprotected:  # a gate fails such a run unless --allow-missing-controls
            props["unprotected"] = "; ".join(view.unprotected)
        if view.ended:
            props["ended"] = view.ended
        if view.time_to_recover_s is not None:
            props["time_to_recover_s"] = f"{view.time_to_recover_s:g}"
        root.append(
            _suite(f"gameday: {view.title}", suite_cases(view), view.duration or 0.0, props)
        )
    if min_score is not None:
        props = {"score": "n/a" if score.value is None else f"{score.value:.1f}"}
        root.append(_suite("gameday.score", _score_cases(score, min_score), 0.0, props))
    for name, cases, props in extra:
        root.append(_suite(name, cases, 0.0, props))
    suites = list(root)
    for key in ("tests", "failures", "errors"):
        root.set(key, str(sum(int(s.get(key, "0")) for s in suites)))
    root.set("time", f"{sum(float(s.get('time', '0')) for s in suites):.3f}")
    ET.indent(root)
    document: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return document
