"""`gameday gate`: JUnit XML that validates against the JUnit schema, and the exit codes."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from support.gameday_cli import ROOT, run_gameday

SCHEMA = xmlschema.XMLSchema(Path(__file__).with_name("junit.xsd"))


def _gate(tmp_path: Path, *args: str) -> tuple[int, str]:
    out = run_gameday(tmp_path, tmp_path / "ledger.sqlite3", "gate", *args)
    return out.returncode, out.stdout + out.stderr


def _cases(path: Path) -> dict[str, dict[str, ET.Element]]:
    """suite name -> test case name -> element (after schema validation)."""
    SCHEMA.validate(str(path))
    root = ET.parse(path).getroot()  # noqa: S314 - our own file
    found: dict[str, dict[str, ET.Element]] = {}
    for suite in root.iter("testsuite"):
        cases = {c.get("name", ""): c for c in suite.iter("testcase")}
        found[suite.get("name", "")] = cases
        assert int(suite.get("tests", "-1")) == len(cases)
        for key, tag in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
            assert int(suite.get(key, "-1")) == sum(c.find(tag) is not None for c in cases.values())
    assert int(root.get("tests", "-1")) == sum(len(c) for c in found.values())
    return found


def test_schema_rejects_what_ci_systems_reject(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text('<testsuites><testsuite name="x" failures="0" errors="0"/></testsuites>')
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        SCHEMA.validate(str(bad))


def test_junit_from_journals_carries_measured_values(
    real_journals: dict[str, Path], tmp_path: Path
) -> None:
    junit = tmp_path / "out" / "gameday.xml"
    code, output = _gate(
        tmp_path,
        "--journals",
        str(real_journals["deviated"]),
        str(real_journals["held"]),
        "--junit",
        str(junit),
    )
    assert code == 1, output
    suites = _cases(junit)
    deviated = suites["gameday: a held port is noticed"]
    after = deviated["port-closed [after]"].find("failure")
    assert after is not None
    assert after.get("type") == "ToleranceNotMet"
    assert after.get("message", "").startswith("measured true at +")
    assert after.get("message", "").endswith("tolerance == false")
    journal = json.loads(real_journals["deviated"].read_text())
    during = [
        p["tolerance_met"]
        for s in journal["steady_states"]["during"]
        for p in s["probes"]
        if p["activity"]["name"] == "port-closed"
    ]
    failure = deviated["port-closed [during]"].find("failure")
    assert failure is not None
    assert failure.get("message", "").startswith(f"{during.count(False)} of {len(during)} checks")
    assert deviated["port-closed [before]"].find("failure") is None
    assert deviated["steady state held"].find("failure") is not None
    assert deviated["faults rolled back"].find("error") is None
    held = suites["gameday: No fault is left behind by earlier game days"]
    assert set(held) == {
        "open-faults [before]",
        "open-faults [during]",
        "open-faults [after]",
        "steady state held",
        "faults rolled back",
    }
    assert all(len(case) == 0 for case in held.values())


@pytest.mark.parametrize(("minimum", "expected"), [(40, 0), (60, 1)])
def test_min_score_judges_deviations_by_the_score(
    real_journals: dict[str, Path], tmp_path: Path, minimum: int, expected: int
) -> None:
    junit = tmp_path / "gameday.xml"
    code, output = _gate(
        tmp_path,
        "--journals",
        str(real_journals["deviated"]),
        str(real_journals["held"]),
        "--junit",
        str(junit),
        "--min-score",
        str(minimum),
    )
    assert code == expected, output
    score_case = _cases(junit)["gameday.score"][f"resilience score >= {minimum}"]
    failure = score_case.find("failure")
    assert (failure is not None) == bool(expected)
    if failure is not None:
        assert "resilience score 50.0 / 100" in failure.get("message", "")


def test_gate_runs_experiments_and_passes_when_they_hold(tmp_path: Path) -> None:
    junit = tmp_path / "gameday.xml"
    code, output = _gate(
        tmp_path,
        str(ROOT / "experiments" / "ledger-clean.json"),
        "--junit",
        str(junit),
        "--journal-dir",
        str(tmp_path / "j"),
    )
    assert code == 0, output
    cases = _cases(junit)["gameday: No fault is left behind by earlier game days"]
    assert set(cases) == {
        "open-faults [before]",
        "open-faults [after]",
        "steady state held",
        "faults rolled back",
    }
    assert all(len(case) == 0 for case in cases.values())
    assert json.loads((tmp_path / "j" / "journal-ledger-clean.json").read_text())["gameday"]


def test_a_failed_action_is_an_error_and_exit_2(tmp_path: Path) -> None:
    experiment = {
        "title": "the fault cannot be injected",
        "description": "the action fails",
        "steady-state-hypothesis": {
            "title": "no fault open",
            "probes": [
                {
                    "type": "probe",
                    "name": "open-faults",
                    "tolerance": 0,
                    "provider": {
                        "type": "python",
                        "module": "chaos_ext.faults.probes",
                        "func": "open_faults",
                    },
                }
            ],
        },
        "method": [
            {
                "type": "action",
                "name": "inject",
                "provider": {
                    "type": "python",
                    "module": "support.faultkit",
                    "func": "fail",
                    "arguments": {"message": "refused at 38 connections"},
                },
            }
        ],
    }
    path = tmp_path / "failing.json"
    path.write_text(json.dumps(experiment))
    junit = tmp_path / "gameday.xml"
    code, output = _gate(tmp_path, str(path), "--junit", str(junit), "--min-score", "0")
    assert code == 2, output
    verdict = _cases(junit)["gameday: the fault cannot be injected"]["steady state held"]
    error = verdict.find("error")
    assert error is not None
    message = error.get("message", "")
    assert message.startswith("run failed: activity failed: 'inject' failed: ")
    assert message.endswith("refused at 38 connections")


def test_invalid_experiment_exits_3_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"title": "no method", "description": "d"}))
    code, output = _gate(tmp_path, str(path), "--junit", str(tmp_path / "g.xml"))
    assert code == 3, output
    assert not (tmp_path / "g.xml").exists()
