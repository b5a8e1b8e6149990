"""Incident 1 replayed in short form in a real sandbox, its classification checked independently.

The shared fragile sandbox (netns backend, conftest.py) runs
``experiments/incidents/01-eks-load-test.json`` with a shorter ramp
(``vars/short-eks.json``: 5 to 50 req/s over 40 s): every database slot held
(``db_free_slots`` 0; 2 in the experiment's default). With a slot or two left free, a
refusal needs the app's short-lived connections to overlap, which is a race: under
``stress-ng --cpu 1`` a run with 1 free slot saw 9 refusals, never 2 in one second, so
db-refused had no onset. With none free every connection the app opens is refused, so
the order checked below (the cap before the packet limit) holds by construction and the
checks are of the classification. DNS packets from the app's namespace capped at 200/s,
the load on /search. ``error_onset`` classifies the load's failed responses by the cause
the app names (``X-Error-Cause``) and finds each class's onset. Checked against what the
servers themselves saw, not the app's or the load's labels:

* PostgreSQL's own log: every ``FATAL: sorry, too many clients already`` /
  ``remaining connection slots are reserved`` line is one refused
  connection, with the server's timestamp. The load's ``db-refused`` count
  cannot exceed the refusals the server logged during the load, and in the
  class's onset second the server must have logged at least the 2 refusals
  that made it the onset (the background traffic's refusals, or single ones
  of the load, may come earlier).
* The kernel's nftables counters of the rate limiter (exported to Prometheus
  as ``gameday_dns_rate_limit_dropped_packets_total``): DNS failures cannot
  begin before the limiter drops its first packet, and must begin soon after.
"""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.harness import ROOT
from support.sandbox import sandbox_cli

from chaos_ext._core.targets.netns import run_in_netns

EXPERIMENT = ROOT / "experiments" / "incidents" / "01-eks-load-test.json"
SHORT = ROOT / "experiments" / "incidents" / "vars" / "short-eks.json"
_REFUSED = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) UTC \[\d+\] FATAL:  "
    r"(sorry, too many clients already|remaining connection slots are reserved)"
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600), pytest.mark.sandbox_app("fragile")]


@pytest.fixture(scope="module")
def replay(shared_sandboxes: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The journal of the short replay, the server's refusal times and the limiter's drops."""
    shared = shared_sandboxes.get("fragile")
    prefix, state = shared.prefix, shared.state
    journals = tmp_path_factory.mktemp("journals-incident")
    run = sandbox_cli(
        prefix,
        state,
        "run",
        "--journal-dir",
        str(journals),
        "--var-file",
        str(SHORT),
        str(EXPERIMENT),
        timeout=420,
    )
    assert run.returncode in (0, 1), run.stdout[-3000:] + run.stderr[-3000:]
    journal = json.loads((journals / "journal-01-eks-load-test.json").read_text())
    sandbox = json.loads((state / "sandbox" / prefix / "state.json").read_text())
    log = Path(sandbox["services"]["postgres"]["dir"]) / "server.log"
    # the shared sandbox's log holds earlier tests' refusals too: the checks below take
    # only those of this replay's load window
    refusals = [
        datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC).timestamp()
        for m in map(_REFUSED.match, log.read_text(errors="replace").splitlines())
        if m
    ]
    load = _outputs(journal)["ramp-the-load"]
    drops = _first_drop(
        f"{prefix}-mon", sandbox["services"]["prometheus"]["url"], load["start"], load["end"]
    )
    return {"journal": journal, "refusals": refusals, "first_drop": drops, "load": load}


def _outputs(journal: dict[str, Any]) -> dict[str, Any]:
    return {r["activity"]["name"]: r.get("output") for r in journal["run"]}


def _first_drop(mon_netns: str, prometheus: str, start: float, end: float) -> float | None:
    """The first second in which the kernel's limiter dropped a DNS packet (Prometheus)."""
    query = urllib.parse.urlencode(
        {
            "query": "sum(increase(gameday_dns_rate_limit_dropped_packets_total[2s]))",
            "start": f"{start - 5:.0f}",
            "end": f"{end + 5:.0f}",
            "step": "1",
        }
    )

    def fetch() -> Any:
        url = f"{prometheus}/api/v1/query_range?{query}"
        with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 - the sandbox's
            return json.load(answer)

    found = run_in_netns(f"/run/netns/{mon_netns}", fetch, timeout=30)
    series = found["data"]["result"]
    values = [(float(t), float(v)) for t, v in series[0]["values"]] if series else []
    # increase over [2s] ending at t: the first drop was at most 2 s before t
    return next((t - 2 for t, v in values if v > 0), None)


def _class(onset: dict[str, Any], name: str) -> dict[str, Any]:
    found = [c for c in onset["classes"] if c["error_class"] == name]
    assert found, f"no {name} errors: {onset['classes']}"
    return found[0]


def test_the_replay_deviates_with_both_causes_of_the_incident(replay: dict[str, Any]) -> None:
    journal = replay["journal"]
    assert journal["gameday"]["outcome"] == "deviated"
    onset = _outputs(journal)["errors-by-cause-with-onset"]
    db, dns = _class(onset, "db-refused"), _class(onset, "dns")
    # the connection cap bites before the packet limit: the incident's order
    assert db["onset_rate"] < dns["onset_rate"] <= 50, onset["classes"]
    assert onset["breaking_point"]["rate"] <= db["onset_rate"]
    assert sum(c["share"] for c in onset["classes"]) == pytest.approx(1.0, abs=1e-4)
    assert db["share"] == pytest.approx(db["count"] / onset["errors"], abs=1e-6)


def test_db_refusals_match_the_servers_own_log(replay: dict[str, Any]) -> None:
    onset = _outputs(replay["journal"])["errors-by-cause-with-onset"]
    db = _class(onset, "db-refused")
    load = replay["load"]
    during = [t for t in replay["refusals"] if load["start"] - 1 <= t <= load["end"] + 10]
    # each db-refused response is one connection the server refused and logged (the
    # background traffic's refusals come on top)
    assert len(during) >= db["count"], (len(during), db["count"])
    onset_at = load["start"] + db["onset_offset_seconds"]
    # the onset is the load's first second (of scheduled time) with >= 2 refused
    # responses: the server logged at least 2 refusals in that second (a request is
    # refused a few ms after its scheduled time, at most its wait for a connection)
    in_onset_second = [t for t in during if onset_at - 0.5 <= t <= onset_at + 2.5]
    assert len(in_onset_second) >= 2, (onset_at, during[:20])
    assert during[0] <= onset_at + 2.5


def test_dns_failures_begin_when_the_limiter_starts_dropping(replay: dict[str, Any]) -> None:
    onset = _outputs(replay["journal"])["errors-by-cause-with-onset"]
    dns = _class(onset, "dns")
    first_drop = replay["first_drop"]
    assert first_drop is not None, "the kernel's limiter dropped nothing"
    onset_at = replay["load"]["start"] + dns["onset_offset_seconds"]
    # a lookup fails only after its packets were dropped (glibc retries after 1 s,
    # twice), and the fragile app's lookups fail soon after drops begin
    assert first_drop - 3 <= onset_at <= first_drop + 8, (onset_at - first_drop, dns)
