"""Benchmark: does the default game day give the right verdicts, fast, on a busy machine?

For each app (fragile, tuned) the sandbox comes up once (``gameday sandbox up``,
backend auto), then the default game day (``experiments/sandbox/*.json``) runs
R times on a quiet machine and R times with a CPU hog on one core
(``stress-ng --cpu 1``, stopped afterwards). The expected verdict of every
experiment: ``deviated`` on the fragile app with its fault injected (the
method's first action succeeded and the fault ledger has a closed entry for
it), ``held`` on the tuned app. ``unsteady``, ``failed`` or anything else is
wrong. Figures: the share of runs with the expected verdict per experiment and
condition, the game day's wall time (``gameday sandbox run``, all experiments),
and the baseline noise (the app's 10 s p95 and p50 over the minute of plain
traffic before each game day, as Prometheus saw it).

    .venv/bin/python benchmarks/sandbox.py               # R=1: 4 game days, ~12 min
    .venv/bin/python benchmarks/sandbox.py --runs 3 --apps tuned

Anchor: the quiet runs of the same invocation (``game_day_loaded_s`` compares
with ``game_day_s``). Last line::

    sandbox correct_verdicts=<k>/<n> game_day_s=<median> game_day_loaded_s=<median>
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos_ext._products.sandbox._topology import topology

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = sorted((ROOT / "experiments" / "sandbox").glob("*.json"))
EXPECTED = {"fragile": "deviated", "tuned": "held"}
HOG_CAP_S = 3600
OBSERVE_S = 60
"""Before each game day: a minute of plain traffic (with the hog, if any), whose noise is
reported; it also lets the previous game day's faults leave Prometheus' windows."""
BUCKETS = 'rate(http_request_duration_seconds_bucket{job="app"}[10s])'


def quantile(q: float) -> str:
    return f"histogram_quantile({q}, sum by (le) ({BUCKETS}))"


@dataclass
class Tally:
    """Verdicts and times per (app, condition)."""

    verdicts: dict[str, list[bool]] = field(default_factory=dict)
    wall: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _gameday(prefix: str, env: dict[str, str], *args: str, timeout: float) -> int:
    argv = [sys.executable, "-m", "chaos_ext.cli.main", "sandbox", *args, "--prefix", prefix]
    return subprocess.run(argv, env=env, cwd=ROOT, timeout=timeout, check=False).returncode


def _injected(journal: dict[str, Any]) -> bool:
    """The method's first action succeeded and its ledger entry was opened and closed."""
    actions = [r for r in journal.get("run") or [] if r["activity"]["type"] == "action"]
    if not actions or actions[0]["status"] != "succeeded":
        return False
    ledger = (journal.get("gameday") or {}).get("ledger") or []
    return bool(ledger) and all(e.get("state") == "closed" for e in ledger)


def judge(journal: dict[str, Any], app: str) -> tuple[bool, str]:
    """(expected verdict?, what happened) for one journal."""
    outcome = (journal.get("gameday") or {}).get("outcome") or journal.get("status", "?")
    if outcome != EXPECTED[app]:
        return False, f"{outcome} (expected {EXPECTED[app]})"
    if app == "fragile" and not _injected(journal):
        return False, "deviated without its fault injected"
    return True, outcome


def _noise(prefix: str) -> str:
    """The app's 10 s p95/p50 over the last 45 s, from the sandbox's Prometheus (the first
    15 s of the quiet minute still hold the end of the previous game day's faults)."""
    code = (
        "import json,sys,time,urllib.parse,urllib.request\n"
        "out={}\n"
        "for name,q in json.loads(sys.argv[1]).items():\n"
        " a={'query':q,'start':time.time()-45,'end':time.time(),'step':1}\n"
        " u=sys.argv[2]+'/api/v1/query_range?'+urllib.parse.urlencode(a)\n"
        " r=json.load(urllib.request.urlopen(u,timeout=10))['data']['result']\n"
        " out[name]=[float(v) for _,v in r[0]['values']] if r else []\n"
        "print(json.dumps(out))\n"
    )
    mon = topology(prefix).host("mon")
    exprs = {"p95": quantile(0.95), "p50": quantile(0.5)}
    done = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            mon.netns,
            sys.executable,
            "-c",
            code,
            json.dumps(exprs),
            f"http://{mon.address}:9090",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    try:
        series = json.loads(done.stdout)
    except ValueError:
        return "baseline: Prometheus not reachable"
    parts = []
    for name, values in series.items():
        clean = sorted(v for v in values if not math.isnan(v))
        if clean:
            parts.append(f"{name} median {statistics.median(clean):.3f} s max {clean[-1]:.3f} s")
    return "baseline last 45 s: " + ", ".join(parts)


def _game_day(prefix: str, env: dict[str, str], out: Path, app: str, tally: Tally) -> None:
    print(f"    {OBSERVE_S} s of plain traffic first", flush=True)
    time.sleep(OBSERVE_S)
    tally.notes.append(_noise(prefix))
    started = time.monotonic()
    _gameday(prefix, env, "run", "--journal-dir", str(out), *map(str, EXPERIMENTS), timeout=1800)
    tally.wall.append(time.monotonic() - started)
    for experiment in EXPERIMENTS:
        path = out / f"journal-{experiment.stem}.json"
        journal = json.loads(path.read_text()) if path.exists() else {}
        ok, what = judge(journal, app) if journal else (False, "no journal")
        tally.verdicts.setdefault(experiment.stem, []).append(ok)
        settle = (journal.get("gameday") or {}).get("settle") or {}
        print(
            f"    {experiment.stem}: {what} (settled after {settle.get('waited_s', '?')} s)",
            flush=True,
        )


def _hog() -> subprocess.Popen[bytes]:
    if shutil.which("stress-ng") is None:
        raise SystemExit("stress-ng is missing: scripts/install-system-deps.sh installs it")
    return subprocess.Popen(
        ["stress-ng", "--cpu", "1", "--timeout", f"{HOG_CAP_S}s", "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def bench_app(app: str, runs: int, work: Path) -> dict[str, Tally]:
    prefix = "b" + os.urandom(2).hex()
    env = {**os.environ, "GAMEDAY_LEDGER": str(work / "ledger.sqlite3"), "COLUMNS": "120"}
    tallies = {"quiet": Tally(), "loaded": Tally()}
    print(f"== {app}: sandbox up ({prefix})", flush=True)
    try:
        if _gameday(prefix, env, "up", "--app", app, timeout=900) != 0:
            raise SystemExit(f"sandbox up failed for the {app} app")
        for condition, tally in tallies.items():
            hog = _hog() if condition == "loaded" else None
            try:
                for run in range(runs):
                    print(f"  {app}, {condition}, game day {run + 1}/{runs}", flush=True)
                    _game_day(prefix, env, work / f"{app}-{condition}-{run}", app, tally)
                    print(f"    {tally.notes[-1]}; {tally.wall[-1]:.0f} s", flush=True)
            finally:
                if hog is not None:
                    hog.terminate()
                    hog.wait(timeout=30)
    finally:
        _gameday(prefix, env, "down", timeout=600)
    return tallies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="game days per app and condition")
    parser.add_argument("--apps", default="fragile,tuned", help="comma-separated (default both)")
    args = parser.parse_args()
    apps = [a for a in args.apps.split(",") if a]
    if os.geteuid() != 0:
        raise SystemExit("the sandbox needs root (network namespaces)")
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    results: dict[tuple[str, str], Tally] = {}
    with tempfile.TemporaryDirectory(prefix="gd-bench-sandbox-") as tmp:
        for app in apps:
            for condition, tally in bench_app(app, args.runs, Path(tmp)).items():
                results[(app, condition)] = tally
    good = total = 0
    print("\nexpected verdicts (share of runs):")
    for (app, condition), tally in results.items():
        for name, oks in tally.verdicts.items():
            good, total = good + sum(oks), total + len(oks)
            print(f"  {app:8s} {condition:7s} {name:22s} {sum(oks)}/{len(oks)}")
    quiet = [w for (_, c), t in results.items() if c == "quiet" for w in t.wall]
    loaded = [w for (_, c), t in results.items() if c == "loaded" for w in t.wall]
    rounded = {"quiet": [round(s) for s in quiet], "loaded": [round(s) for s in loaded]}
    print(f"game day wall time (s): quiet {rounded['quiet']}, loaded {rounded['loaded']}")
    load = os.getloadavg()
    print(f"machine afterwards: load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    quiet_s, loaded_s = statistics.median(quiet), statistics.median(loaded)
    print(
        f"sandbox correct_verdicts={good}/{total} "
        f"game_day_s={quiet_s:.0f} game_day_loaded_s={loaded_s:.0f}"
    )


if __name__ == "__main__":
    main()
