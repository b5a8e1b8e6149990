"""docs/verdicts.md's truth table, row by row, through the real gameday CLI.

Each row (expanded over the providers it names) builds an experiment whose
hypothesis probe, method action and rollback all use that provider: Python
activities (``support.verdictkit``), real ``sh`` processes, and a real HTTP
server on 127.0.0.1. The activity of the row's phase ends as the row says;
signals are real SIGINT/SIGTERM sent to the gameday process while that
activity runs; the stop condition is an abort plan breached in a real
Prometheus (Debian's). ``gameday gate`` runs it, and the exit code, the
journal, the JUnit file, the resilience score and the summary are checked
against the row. The table and the code cannot drift: a row the code does not
honour fails here, and a test checks the table covers every phase and ending.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from support.harness import ROOT, cli_env, gameday_argv
from support.verdictkit import BehaviourServer, process_script

from chaos_ext._products.report.model import view_of
from chaos_ext._products.report.render import render_markdown
from chaos_ext._products.report.score import resilience_score
from chaos_ext._products.sandbox.servers import prometheus
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer
from chaos_ext._runner.verdict import failing_result

DOC = ROOT / "docs" / "verdicts.md"
PHASES = (
    "settle",
    "before",
    "method",
    "pause",
    "after",
    "rollbacks",
    "recovery",
    "ledger sweep",
)
ENDINGS = (
    "ok",
    "failing result",
    "accepted failing result",
    "exception",
    "timeout",
    "Ctrl-C",
    "SIGTERM",
    "stop condition",
    "ungraceful exit",
)
SIGNALS = {"Ctrl-C": signal.SIGINT, "SIGTERM": signal.SIGTERM}
HYPOTHESIS_PHASES = ("settle", "before", "after", "recovery")


@dataclass(frozen=True)
class Row:
    provider: str
    phase: str
    ending: str
    outcome: str
    exit: int
    status: str
    rollbacks: str
    junit_verdict: str
    junit_rollback: str
    score: str

    @property
    def id(self) -> str:
        return f"{self.provider}-{self.phase}-{self.ending}".replace(" ", "_")


def table_rows(text: str) -> list[Row]:
    """The truth table's rows, one per provider of each line."""
    section = text.split("## The truth table", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 10 or cells[0] in ("provider", "") or set(cells[0]) <= {"-"}:
            continue
        for provider in (p.strip() for p in cells[0].split(",")):
            rows.append(Row(provider, cells[1], cells[2], cells[3], int(cells[4]), *cells[5:]))
    return rows


ROWS = table_rows(DOC.read_text())


def test_the_table_covers_every_phase_ending_and_provider() -> None:
    seen = {(r.phase, r.ending) for r in ROWS}
    assert {r.phase for r in ROWS} == set(PHASES)
    assert {r.ending for r in ROWS} == set(ENDINGS)
    assert {r.provider for r in ROWS} == {"python", "process", "http"}
    for phase in ("settle", "before", "method", "after", "rollbacks"):
        for ending in ("ok", "failing result", "Ctrl-C", "SIGTERM"):
            assert (phase, ending) in seen, (phase, ending)
    assert {("recovery", e) for e in ("ok", "failing result", "SIGTERM", "Ctrl-C")} <= seen
    # docs/verdicts.md "Stops": a stop condition over a fault's whole life, signals in the sweep
    assert {("after", "stop condition"), ("pause", "stop condition")} <= seen
    assert {("ledger sweep", "SIGTERM"), ("ledger sweep", "Ctrl-C")} <= seen
    assert len({r.id for r in ROWS}) == len(ROWS), "a row is listed twice"


def _outcomes_table(text: str) -> dict[int, set[str]]:
    section = text.split("## Outcomes and exit codes", 1)[1] if "## Outcomes" in text else text
    table: dict[int, set[str]] = {}
    for code, outcomes in re.findall(r"^\| (\d) \| ([^|]+) \|", section, re.MULTILINE):
        table.setdefault(int(code), {o.strip() for o in outcomes.split(",")})
    return table


def test_the_readme_outcomes_match_docs_verdicts() -> None:
    readme = (ROOT / "README.md").read_text().split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    assert _outcomes_table(readme) == _outcomes_table(DOC.read_text())


@pytest.fixture(scope="module")
def http() -> Iterator[BehaviourServer]:
    with BehaviourServer() as server:
        yield server


@pytest.fixture(scope="module")
def prom(http: BehaviourServer) -> Iterator[PrometheusServer]:
    """Scrapes the behaviour server's /metrics: a row's stop condition breaches once
    the row's activity has started."""
    with prometheus.start(targets=[http.target], scrape_interval="1s") as server:
        server.wait_scraped(timeout=30)
        yield server


class Builder:
    """The experiment of one row (module docstring)."""

    def __init__(
        self, row: Row, folder: Path, http: BehaviourServer, prom_url: str | None = None
    ) -> None:
        self.row, self.folder, self.http, self.prom_url = row, folder, http, prom_url
        self.ran = str(folder / "method-ran")
        self.rolled = str(folder / "rolled-back")
        self.marker = str(folder / "started")

    def _ending_of(self, phase: str) -> str:
        return self.row.ending if self.row.phase == phase else "ok"

    def _mode(self, ending: str) -> str:
        return {
            "ok": "ok",
            "failing result": "fail",
            "accepted failing result": "fail",
            "exception": "raise",
            "timeout": "hang",
            "Ctrl-C": "hang",
            "SIGTERM": "hang",
            "stop condition": "hang",
            "ungraceful exit": "hang",
        }[ending]

    def provider(self, name: str, phase: str, **extra: Any) -> dict[str, Any]:
        ending = self._ending_of(phase)
        behaviour: dict[str, Any] = {"mode": self._mode(ending), **extra}
        if ending in SIGNALS or ending in ("stop condition", "ungraceful exit", "timeout"):
            behaviour["marker"] = self.marker
        if phase == "rollbacks" and ending in SIGNALS:
            behaviour["seconds"] = 3  # the signal lands in it; it must still complete
        if phase == "after":
            behaviour.update(when="after", ran=self.ran)
        if phase == "recovery":  # the probe misbehaves once the rollback ran
            behaviour.update(when="after", ran=self.rolled)
        kind = self.row.provider
        if kind == "python":
            return {
                "type": "python",
                "module": "support.verdictkit",
                "func": "behave",
                "arguments": behaviour,
            }
        timeout = {"timeout": 1} if ending == "timeout" else {}
        if kind == "process":
            return {
                "type": "process",
                "path": "sh",
                "arguments": ["-c", process_script(**behaviour)],
                **timeout,
            }
        return {"type": "http", "url": self.http.url(**behaviour), **timeout}

    def probe(self) -> dict[str, Any]:
        tolerance = {"python": True, "process": 0, "http": 200}[self.row.provider]
        phase = self.row.phase if self.row.phase in HYPOTHESIS_PHASES else "before"
        return {
            "type": "probe",
            "name": "probe",
            "tolerance": tolerance,
            "provider": self.provider("probe", phase),
        }

    def action(self) -> dict[str, Any]:
        if self.row.phase == "ledger sweep":
            arguments: dict[str, Any] = {"fail_undo": self.row.ending == "exception"}
            if self.row.ending in SIGNALS:  # the signal lands in a 3 s undo
                arguments.update(undo_marker=self.marker, undo_seconds=3)
            return {
                "type": "action",
                "name": "action",
                "provider": {
                    "type": "python",
                    "module": "support.verdictkit",
                    "func": "leave_fault",
                    "arguments": arguments,
                },
            }
        if self.row.phase == "pause":  # the action succeeds, then its 60 s pause runs
            ok = Builder(replace(self.row, phase="method", ending="ok"), self.folder, self.http)
            provider = ok.provider("action", "method", touch=self.marker)
            return {
                "type": "action",
                "name": "action",
                "provider": provider,
                "pauses": {"after": 60},
            }
        return {
            "type": "action",
            "name": "action",
            "provider": self.provider("action", "method", touch=self.ran),
        }

    def experiment(self) -> dict[str, Any]:
        method = [self.action()]
        if self.row.ending == "ungraceful exit":
            method.insert(
                0,
                {
                    "type": "action",
                    "name": "leave-ungracefully",
                    "background": True,
                    "provider": {
                        "type": "python",
                        "module": "chaoslib.exit",
                        "func": "exit_ungracefully",
                    },
                },
            )
        experiment: dict[str, Any] = {
            "title": f"row {self.row.id}",
            "description": "a row of docs/verdicts.md",
            "steady-state-hypothesis": {"title": "holds", "probes": [self.probe()]},
            "method": method,
            "rollbacks": [
                {
                    "type": "action",
                    "name": "rollback",
                    "provider": self.provider(
                        "rollback", "rollbacks", touch=self.rolled, remove=self.ran
                    ),
                }
            ],
        }
        if self.row.ending == "stop condition":
            experiment["configuration"] = {"prometheus_url": self.prom_url}
        if self.row.ending == "accepted failing result":
            name = "rollback" if self.row.phase == "rollbacks" else "action"
            experiment["extensions"] = [{"name": "gameday", "accept_failures": [name]}]
        return experiment


def _gate(row: Row, folder: Path, experiment: Path, http: BehaviourServer) -> tuple[int, str]:
    args = [
        "gate",
        str(experiment),
        "--junit",
        str(folder / "junit.xml"),
        "--journal-dir",
        str(folder),
        "--recover",
        "2",
    ]
    if row.phase == "settle":
        args += ["--settle", "2" if row.ending not in SIGNALS else "20"]
    if row.ending == "stop condition":
        plan = folder / "plan.json"
        http.watch(row.id, str(folder / "started"))
        expr = f'max(verdict_row_started{{row="{row.id}"}}) or vector(0)'
        plan.write_text(
            json.dumps(
                {
                    "interval_seconds": 0.5,
                    "unreachable_after": 3,
                    "conditions": [
                        {
                            "name": "the-action-started",
                            "promql": expr,
                            "tolerance": {"op": "<", "threshold": 1},
                        }
                    ],
                }
            )
        )
        args += ["--abort-on", str(plan)]
    proc = subprocess.Popen(
        gameday_argv(*args),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cli_env(folder / "ledger.sqlite3"),
        cwd=folder,
    )
    if row.ending in SIGNALS:
        marker = folder / "started"
        deadline = time.monotonic() + 60
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), f"the {row.phase} activity never started"
        time.sleep(0.2)
        proc.send_signal(SIGNALS[row.ending])
    out, _ = proc.communicate(timeout=120)
    return proc.returncode, out


def _junit_case(junit: Path, name: str) -> str:
    root = ET.parse(junit).getroot()  # noqa: S314 - our own file
    case = root.find(f".//testcase[@name='{name}']")
    assert case is not None, name
    children = [c for c in case if c.tag in ("failure", "error", "skipped")]
    return "pass" if not children else f"{children[0].tag} {children[0].get('type')}"


def _check_rollbacks(row: Row, journal: dict[str, Any]) -> None:
    runs = journal.get("rollbacks") or []
    if row.rollbacks == "none":
        assert runs == [], runs
        assert journal["gameday"].get("rollbacks_skipped"), "no line says why none ran"
        return
    assert [r["activity"]["name"] for r in runs] == ["rollback"], runs
    if row.outcome != "rollback-failed" and "accepted" not in row.ending:
        assert failing_result(runs[0]) is None, runs[0]  # it ran to its end
    if row.rollbacks == "ran by gameday":
        assert journal["gameday"].get("rollbacks_run_by"), journal["gameday"]


def _score(view: Any) -> str:
    score = resilience_score([view])
    if score.value is None:
        assert score.left_out == 1
        return "left out"
    return "held" if score.value == 100 else "not held"


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_row(row: Row, tmp_path: Path, http: BehaviourServer, request: Any) -> None:
    prom_url = request.getfixturevalue("prom").url if row.ending == "stop condition" else None
    experiment = tmp_path / "row.json"
    experiment.write_text(json.dumps(Builder(row, tmp_path, http, prom_url).experiment(), indent=2))
    code, out = _gate(row, tmp_path, experiment, http)
    assert code == row.exit, out
    journal = json.loads((tmp_path / "journal-row.json").read_text())
    assert journal["status"] == row.status, out
    assert journal["gameday"]["outcome"] == row.outcome, out
    _check_rollbacks(row, journal)
    junit = tmp_path / "junit.xml"
    assert _junit_case(junit, "steady state held") == row.junit_verdict, out
    assert _junit_case(junit, "faults rolled back") == row.junit_rollback, out
    view = view_of(journal, source=str(tmp_path / "journal-row.json"))
    assert view.outcome == row.outcome
    assert _score(view) == row.score
    summary = render_markdown([view], "truth table")
    assert f"## row {row.id}: {row.outcome}" in summary
    if "accepted" in row.ending:
        assert "accepted by the experiment" in summary
