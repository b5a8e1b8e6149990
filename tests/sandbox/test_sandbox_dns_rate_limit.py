"""The fourth sandbox experiment: the resolver's packet-rate limit, fragile app vs tuned app.

Against the shared sandbox (netns backend) of each app variant (conftest.py): load on /search
(getaddrinfo through the search list with ndots:5 on every request), DNS
packets from the app's namespace towards dnsmasq capped at 50/s by
limit_dns_rate. The fragile app asks dnsmasq directly: its lookups fail,
Prometheus counts the getaddrinfo errors and the limiter's drops, the
experiment deviates. The tuned app asks the node-local caching dnsmasq: the
limiter sees a handful of packets, nothing is dropped, it holds.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from support.harness import ROOT
from support.sandbox import sandbox_cli

EXPERIMENT = ROOT / "experiments" / "sandbox" / "04-dns-rate-limit.json"
MODES = ("fragile", "tuned")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(
    scope="module",
    params=[pytest.param(mode, marks=pytest.mark.sandbox_app(mode)) for mode in MODES],
)
def variant(
    request: pytest.FixtureRequest,
    shared_sandboxes: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[str, dict[str, Any]]:
    """(app mode, the experiment's journal) from the shared sandbox of that mode."""
    mode = str(request.param)
    shared = shared_sandboxes.get(mode)
    journals = tmp_path_factory.mktemp(f"journals-{mode}")
    run = sandbox_cli(
        shared.prefix,
        shared.state,
        "run",
        "--journal-dir",
        str(journals),
        str(EXPERIMENT),
        timeout=600,
    )
    assert run.returncode in (0, 1), run.stdout[-3000:] + run.stderr[-3000:]
    return mode, json.loads((journals / "journal-04-dns-rate-limit.json").read_text())


def _outputs(journal: dict[str, Any]) -> dict[str, Any]:
    return {r["activity"]["name"]: r["output"] for r in journal["run"]}


def _series_max(output: dict[str, Any]) -> float:
    return max(v for _, v in output["series"] if not math.isnan(v))


def test_fragile_deviates_and_tuned_holds(variant: tuple[str, dict[str, Any]]) -> None:
    mode, journal = variant
    before = journal["steady_states"]["before"]["probes"][0]
    after = journal["steady_states"]["after"]["probes"][0]
    assert before["tolerance_met"] and before["output"]["error_ratio"] < 0.01, before["output"]
    outputs = _outputs(journal)
    drops = outputs["limiter-drops"]
    assert drops["active"] and drops["pps"] == 50
    if mode == "fragile":
        assert journal["gameday"]["outcome"] == "deviated"
        assert not after["tolerance_met"] and after["output"]["error_ratio"] > 0.3
        assert drops["dropped"] > 0 and drops["packets"] > 50 * 15  # far over 50/s for 20 s
        assert outputs["getaddrinfo-errors-per-second"] > 1  # the app's own count
        assert _series_max(outputs["limiter-drops-over-time"]) > 10  # Prometheus shows both
        assert _series_max(outputs["getaddrinfo-errors-over-time"]) > 1
    else:
        assert journal["gameday"]["outcome"] == "held"
        assert after["tolerance_met"] and after["output"]["sent"] > 200
        assert drops["dropped"] == 0 and drops["packets"] < 50  # the cache asks upstream rarely
        assert outputs["getaddrinfo-errors-per-second"] == 0
        assert _series_max(outputs["limiter-drops-over-time"]) == 0
    assert [r["activity"]["name"] for r in journal["rollbacks"]] == [
        "remove-the-dns-rate-limit",
        "stop-the-search-load",
    ]
    assert {e["state"] for e in journal["gameday"]["ledger"]} == {"closed"}
