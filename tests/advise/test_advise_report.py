"""The report's section of `gameday advise`'s risks: `gameday report --risks risks.json`.

The risks are read from an emulated cluster by the real `gameday advise --json`
(a Deployment of 30 pods on ndots:5 behind kube-dns' dnsmasq, no NodeLocal DNSCache),
then `gameday report` draws them beside a real journal of the fragile sandbox
(tests/fixtures/journals/sandbox-demo, see its README).
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support import k8s_objects as o
from support.advise_cluster import NODES, app, kube_dns, run_advise
from support.harness import ROOT
from support.k8s_emulator import EmulatorHandle

from chaos_ext.cli.main import main

JOURNAL = ROOT / "tests/fixtures/journals/sandbox-demo/fragile/journal-02-dns-saturation.json"


class _Risks(HTMLParser):
    """The rows of the report's ``section#advise`` table: their risk kind and text."""

    def __init__(self) -> None:
        super().__init__()
        self.inside, self.rows = False, {}  # type: bool, dict[str, str]
        self._row: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "section" and found.get("id") == "advise":
            self.inside = True
        if self.inside and tag == "tr" and "risk" in (found.get("class") or "").split():
            self._row = (found.get("class") or "").split()[1].removeprefix("risk-")
            self.rows[self._row] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self.inside = False
        if tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._row is not None:
            self.rows[self._row] += data


def test_the_clusters_risks_are_a_section_of_the_report(
    emulator: EmulatorHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    emulator.put([o.node(n) for n in NODES], app("shop", "checkout", replicas=30, pool=5))
    emulator.put(kube_dns())
    code, advice, _ = run_advise(capsys, "-n", "shop", "-n", "kube-system")
    assert code == 1, advice
    risks = tmp_path / "risks.json"
    risks.write_text(json.dumps(advice))
    out = tmp_path / "report"
    assert main(["report", str(JOURNAL), "-o", str(out), "--risks", str(risks)]) == 0

    page = _Risks()
    page.feed((out / "report.html").read_text())
    assert set(page.rows) == {r["kind"] for r in advice["risks"]} >= {"ndots-5", "dns-no-cache"}
    assert "Deployment shop/checkout (30 pods)" in page.rows["ndots-5"]
    assert "experiments/dns-search-amplification.json" in page.rows["ndots-5"]
    summary = (out / "summary.md").read_text()
    assert "## Risks before any fault (gameday advise)" in summary
    assert "Deployment shop/checkout (30 pods)" in summary


def test_a_risks_file_that_is_not_advises_output_is_one_line_and_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = tmp_path / "risks.json"
    wrong.write_text(json.dumps({"risks": [{"kind": "made-up"}]}))
    code = main(["report", str(JOURNAL), "-o", str(tmp_path / "out"), "--risks", str(wrong)])
    assert code == 3
    assert "unknown risk kind 'made-up'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
