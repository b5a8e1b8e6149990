"""Findings (issue 49): each deviated run's cause, fix and proof, or "cause unknown".

The journals are those of a real sandbox game day, `scripts/demo.sh fragile` and
`scripts/demo.sh tuned` (tests/fixtures/journals/sandbox-demo/README.md says when and
how): the fragile app deviates in the four experiments, the tuned app holds in all four.
A "no evidence" case is one of those journals with the probe that carried the evidence
taken out, as a run without that probe would be.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from support.gameday_cli import ROOT, run_gameday

from chaos_ext._products.findings import (
    CAUSE_UNKNOWN,
    FINDINGS_ENV,
    findings_of,
    load_rules,
    rule_files,
)
from chaos_ext._products.findings.rules import parse_rules
from chaos_ext._products.report.model import view_of
from chaos_ext._products.report.render import render_markdown
from chaos_ext.errors import FindingRulesError

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DEMO = ROOT / "tests" / "fixtures" / "journals" / "sandbox-demo"
FRAGILE = sorted((DEMO / "fragile").glob("journal-*.json"))
TUNED = sorted((DEMO / "tuned").glob("journal-*.json"))

# experiment -> (the rule whose evidence holds, words its fix must carry)
EXPECTED = {
    "journal-01-db-latency.json": ("db-latency-amplified", ("timeouts", "pool")),
    "journal-02-dns-saturation.json": ("dnsmasq-tcp-children-exhausted", ("NodeLocal DNSCache",)),
    "journal-03-db-exhaustion.json": ("db-connections-exhausted", ("pool", "ceiling of 37")),
    "journal-04-dns-rate-limit.json": ("dns-packets-rate-limited", ("ndots", "cache")),
}


def _journal(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def _without_method_activity(journal: dict[str, Any], name: str) -> dict[str, Any]:
    changed = copy.deepcopy(journal)
    changed["run"] = [r for r in changed["run"] if r["activity"]["name"] != name]
    return changed


def test_the_fragile_runs_each_have_their_cause_and_fix() -> None:
    rules = load_rules()
    assert [p.name for p in FRAGILE] == sorted(EXPECTED)
    for path in FRAGILE:
        (finding,) = findings_of(_journal(path), rules, str(path))
        rule, words = EXPECTED[path.name]
        assert finding.rule == rule, (path.name, finding)
        assert finding.fix is not None and finding.proof is not None
        fix = f"{finding.fix.setting} {finding.fix.change}"
        assert all(w in fix for w in words), (path.name, fix)
        assert finding.proof.experiment == f"experiments/sandbox/{path.stem[8:]}.json"
        assert any(e.startswith("fault on: ") for e in finding.evidence)
        assert any(e.startswith("metric that moved: ") for e in finding.evidence)
        assert any(e.startswith("deviated: ") for e in finding.evidence)
        assert "${" not in finding.cause + fix  # every figure the texts quote was measured


def test_the_findings_quote_the_runs_own_figures() -> None:
    rules = load_rules()
    by_name = {p.name: findings_of(_journal(p), rules)[0] for p in FRAGILE}
    exhaustion = by_name["journal-03-db-exhaustion.json"]
    assert "refused new connections at 37 open (max_connections 40, 3 reserved" in (
        exhaustion.cause
    )
    dns = by_name["journal-02-dns-saturation.json"]
    assert "With 25 idle TCP connections" in dns.cause
    assert "metric that moved: app-dns-errors-per-second = 10 at +13.5 s" in dns.evidence[1]
    latency = by_name["journal-01-db-latency.json"]
    assert "rose to 152.063 ms" in latency.cause
    limit = by_name["journal-04-dns-rate-limit.json"]
    assert "limit of 50 DNS packets per second dropped packets (1920 dropped)" in limit.cause
    assert "errors of the load by class: http-5xx 294 (the journal has no onset)" in (
        limit.evidence
    )


INCIDENTS = ROOT / "tests" / "fixtures" / "journals" / "sandbox-incidents" / "fragile"


def test_the_incident_replays_are_judged_by_the_class_of_errors_that_began_first() -> None:
    rules = load_rules()
    found = {
        p.name: findings_of(_journal(p), rules) for p in sorted(INCIDENTS.glob("journal-*.json"))
    }
    (eks,) = found["journal-01-eks-load-test.json"]  # db-connections and dns-rate-limit both on
    assert eks.rule == "dns-packets-rate-limited-under-load"
    assert "error class that began first: dns at 31 req/s, +30.5 s (1323 errors)" in eks.evidence
    assert eks.cause.startswith("DNS errors began first, at 31 req/s, while the resolver's limit")
    assert eks.fix is not None and "ndots" in eks.fix.setting
    (stall,) = found["journal-02-nodelocal-dns-stall.json"]  # upstream-timeout: more, but later
    assert stall.rule == "dnsmasq-tcp-children-exhausted-under-load"
    assert "error class that began first: dns at 6 req/s, +1.0 s (127 errors)" in stall.evidence
    assert stall.fix is not None and "NodeLocal DNSCache" in stall.fix.setting
    (latency,) = found["journal-03-app-db-latency.json"]
    assert latency.rule == "db-latency-amplified"
    # ${median_ms} is the figure that moved (during the delay), not the first one measured
    assert "rose to 201.215 ms" in latency.cause
    # its load had no error; the rollback also returned earlier runs' loads of the same name
    assert not [e for e in latency.evidence if "errors of the load" in e]


def test_the_tuned_runs_have_no_finding() -> None:
    rules = load_rules()
    tuned = [*TUNED, *sorted((INCIDENTS.parent / "tuned").glob("journal-*.json"))]
    assert len(tuned) == 7
    assert [f for p in tuned for f in findings_of(_journal(p), rules)] == []


def test_a_deviation_whose_evidence_is_missing_is_cause_unknown_with_what_to_measure() -> None:
    journal = _without_method_activity(
        _journal(DEMO / "fragile" / "journal-02-dns-saturation.json"), "app-dns-errors-per-second"
    )
    (finding,) = findings_of(journal, load_rules())
    assert not finding.known and finding.fix is None and finding.proof is None
    assert finding.title == CAUSE_UNKNOWN
    assert finding.cause.startswith("cause unknown: no rule's evidence holds (faults on: dnsmasq")
    assert (
        "rule dnsmasq-tcp-children-exhausted: no method probe '*dns-error*' measured it"
        in finding.evidence
    )
    assert 'app_errors_total{cause="dns"}' in finding.measure_next  # the rule's own advice


def test_a_metric_below_its_threshold_is_no_evidence() -> None:
    journal = _journal(DEMO / "fragile" / "journal-03-db-exhaustion.json")
    for run in journal["run"]:
        if run["activity"]["name"] == "app-db-connect-errors-per-second":
            run["output"] = 0.0
    (finding,) = findings_of(journal, load_rules())
    assert finding.title == CAUSE_UNKNOWN
    assert "rule db-connections-exhausted: *db-connect-error* > 0 did not hold (0)" in (
        finding.evidence
    )


def test_a_fault_no_rule_knows_is_cause_unknown_with_the_general_advice() -> None:
    journal = _journal(DEMO / "fragile" / "journal-02-dns-saturation.json")
    for entry in journal["gameday"]["timeline"]["entries"]:
        entry["kind"] = "node-drain"
    (finding,) = findings_of(journal, load_rules())
    assert finding.cause == "cause unknown: no rule's evidence holds (faults on: node-drain)"
    assert "error_onset probe" in finding.measure_next and FINDINGS_ENV in finding.measure_next


def test_a_custom_rule_file_is_picked_up_and_replaces_a_rule_of_the_same_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    custom = tmp_path / "team.yaml"
    custom.write_text(
        """\
findings:
  dnsmasq-tcp-children-exhausted:
    title: our kube-dns ran out of TCP children
    evidence:
      faults: [dnsmasq-tcp-hold]
      metrics: [{probe: dnsmasq-processes, above: 19}]
    cause: dnsmasq had ${dnsmasq-processes} processes.
    fix: {setting: "node-local-dns: forceTCP", change: "off"}
    proof: {experiment: experiments/dns-saturation.json}
    measure_next: dnsmasq's processes
"""
    )
    monkeypatch.setenv(FINDINGS_ENV, str(tmp_path))
    assert rule_files()[-1] == custom
    path = DEMO / "fragile" / "journal-02-dns-saturation.json"
    (finding,) = view_of(_journal(path), str(path)).findings
    assert finding.title == "our kube-dns ran out of TCP children"
    assert finding.cause == "dnsmasq had 21 processes."
    assert finding.fix is not None and finding.fix.setting == "node-local-dns: forceTCP"
    assert "metric that moved: dnsmasq-processes = 21" in finding.evidence[1]


def test_a_rule_file_gameday_cannot_use_is_named_and_the_report_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("findings:\n  x:\n    title: t\n    evidence: {faults: [netem]}\n")
    monkeypatch.setenv(FINDINGS_ENV, str(bad))
    with pytest.raises(FindingRulesError, match="a fault alone is no evidence"):
        load_rules()
    view = view_of(_journal(FRAGILE[0]), str(FRAGILE[0]))
    assert view.findings == () and str(bad) in view.findings_error
    assert f"No finding: {bad}" in render_markdown([view], "t")


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"probes": {}}, "expected a mapping with a 'findings' mapping"),
        ({"findings": {"r": {"evidence": {"faults": ["netem"]}}}}, "a fault alone is no evidence"),
        (
            {"findings": {"r": {"evidence": {"metrics": [{"probe": "p", "above": 1}]}}}},
            "name the fault kinds",
        ),
        (
            {"findings": {"r": {"evidence": {"faults": ["netem"], "metrics": [{"probe": "p"}]}}}},
            "give above or below",
        ),
    ],
)
def test_rules_say_what_is_wrong(document: dict[str, Any], message: str) -> None:
    with pytest.raises(FindingRulesError, match=message):
        parse_rules(document, "rules.yaml")


def test_the_summary_shows_each_finding_and_a_count_that_agrees_with_its_word() -> None:
    views = [view_of(_journal(p), str(p)) for p in FRAGILE]
    summary = render_markdown(views, "fragile")
    assert "**4 findings: 4 with a cause and a fix**" in summary
    assert summary.count("### Finding\n") == 4 and summary.count("**Cause:**") == 4
    one = render_markdown(views[:1], "one")
    assert "**1 finding: 1 with a cause and a fix**" in one
    tuned = render_markdown([view_of(_journal(p), str(p)) for p in TUNED], "tuned")
    assert "**no findings: no hypothesis deviated**" in tuned and "### Finding" not in tuned


def test_gameday_advise_journal_prints_the_same_findings(tmp_path: Path) -> None:
    out = run_gameday(
        tmp_path,
        tmp_path / "ledger.sqlite3",
        "advise",
        "--journal",
        str(DEMO / "fragile"),
        "--json",
    )
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)
    expected = [
        f.as_dict() for p in FRAGILE for f in findings_of(_journal(p), load_rules(), str(p))
    ]
    assert printed == expected
    assert [f["rule"] for f in printed] == [EXPECTED[p.name][0] for p in FRAGILE]
    table = run_gameday(
        tmp_path, tmp_path / "ledger.sqlite3", "advise", "--journal", *map(str, TUNED)
    )
    assert table.returncode == 0, table.stderr
    assert "no findings: no hypothesis deviated" in table.stdout
    missing = run_gameday(tmp_path, tmp_path / "ledger.sqlite3", "advise")
    assert missing.returncode == 3 and "--journal" in missing.stdout + missing.stderr


class _FindingsDom(HTMLParser):
    """The rendered report's findings: the card's count line, its rows, each finding's rule
    and the text of its Cause/Fix paragraphs."""

    def __init__(self) -> None:
        super().__init__()
        self.count = ""
        self.rows = 0
        self.rules: list[str] = []
        self.texts: list[str] = []
        self._into: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        classes = (found.get("class") or "").split()
        if "findings-count" in classes:
            self._into = "count"
        elif "finding-row" in classes:
            self.rows += 1
        elif tag == "div" and "finding" in classes:  # a finding's div holds no other div
            self.rules.append(found.get("data-rule") or "")
            self.texts.append("")
            self._into = "finding"

    def handle_endtag(self, tag: str) -> None:
        if (tag, self._into) in (("p", "count"), ("div", "finding")):
            self._into = None

    def handle_data(self, data: str) -> None:
        if self._into == "count":
            self.count += data
        elif self._into == "finding":
            self.texts[-1] += data


def _rendered(journals: list[Path], tmp_path: Path) -> _FindingsDom:
    tmp_path.mkdir()
    out = run_gameday(
        tmp_path,
        tmp_path / "ledger.sqlite3",
        "report",
        *map(str, journals),
        "-o",
        str(tmp_path / "r"),
    )
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "r" / "report.html").resolve().as_uri()
    dom = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            page,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = _FindingsDom()
    parsed.feed(dom.stdout)
    return parsed


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium missing")
def test_chromium_shows_each_finding_and_a_count_that_agrees_with_them(tmp_path: Path) -> None:
    shown = _rendered(FRAGILE, tmp_path / "fragile")
    assert shown.count.strip() == "4 findings: 4 with a cause and a fix"
    assert shown.rows == len(shown.rules) == 4
    assert shown.rules == [EXPECTED[p.name][0] for p in FRAGILE]
    for text, path in zip(shown.texts, FRAGILE, strict=True):
        assert "Cause:" in text and "Fix:" in text and "Prove the fix:" in text
        assert all(w in text for w in EXPECTED[path.name][1]), text
    assert "NodeLocal DNSCache" in shown.texts[1]

    journal = _without_method_activity(_journal(FRAGILE[1]), "app-dns-errors-per-second")
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps(journal))
    mixed = _rendered([FRAGILE[0], unknown], tmp_path / "mixed")
    assert mixed.count.strip() == "2 findings: 1 with a cause and a fix, 1 cause unknown"
    assert mixed.rules == ["db-latency-amplified", "cause-unknown"]
    assert "Measure next:" in mixed.texts[1] and "Fix:" not in mixed.texts[1]

    tuned = _rendered(TUNED, tmp_path / "tuned")
    assert tuned.count.strip() == "no findings: no hypothesis deviated"
    assert tuned.rows == len(tuned.rules) == 0
