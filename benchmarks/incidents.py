"""Benchmark: the incident replays, fragile app vs tuned app, and how far the fix moves them.

Runs ``scripts/demo.sh incidents`` (the three experiments of
``experiments/incidents/`` in the sandbox, for the fragile app, then the tuned
app; each combines an open-loop load ramp with the incident's faults acting
together), then reads the two sides' journals with
``chaos_ext._products.report.incident_compare`` and prints, per incident, each app's
verdict, breaking point, error share and amplification, the demo's wall time,
and the figures line::

    incidents eks_break_fragile_rps=<n> eks_break_tuned_rps=<n> \
nodelocal_errors_fragile=<x> nodelocal_errors_tuned=<x> latency_amplification=<x>

``eks_break_*_rps``: the load at which incident 1's SLO (errors < 1 %, p95
< 1 s over 5 s) first broke; an app that never broke prints the ramp's peak
(a lower bound: the table says "holds to"). ``nodelocal_errors_*``: incident
2's failed share of the ramp's requests. ``latency_amplification``: incident
3 on the fragile app, added median response time / added DB round-trip time.

    .venv/bin/python benchmarks/incidents.py                   # ~12-15 min on 2 cores
    .venv/bin/python benchmarks/incidents.py --journals reports/incidents-<time>   # no run

Anchor: the incidents' own figures (docs/incidents.md): 90 documented
connections refused at 50-60, a page from ~1 s to 3.9 s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from chaos_ext._products.report.incident_compare import figures, figures_line, read_side, table

ROOT = Path(__file__).resolve().parents[1]
CAP_S = 1800  # the demo promises 20 minutes; a hung run is stopped at 30


def _run_demo(out: Path) -> tuple[int, float]:
    env = {
        **os.environ,
        "INCIDENTS_OUT": str(out),
        "GAMEDAY_SANDBOX_PREFIX": os.environ.get("GAMEDAY_SANDBOX_PREFIX", "gbi"),
        "PYTHON": os.environ.get("PYTHON", sys.executable),
        "GAMEDAY": os.environ.get("GAMEDAY", f"{sys.executable} -m chaos_ext.cli.main"),
        "PYTHONPATH": str(ROOT),
    }
    started = time.monotonic()
    done = subprocess.run(
        [str(ROOT / "scripts" / "demo.sh"), "incidents"], env=env, timeout=CAP_S, check=False
    )
    return done.returncode, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--journals", type=Path, help="a finished demo's folder: read, do not run")
    args = parser.parse_args()
    out = args.journals
    if out is None:
        out = Path(tempfile.mkdtemp(prefix="bench-incidents-"))
        code, seconds = _run_demo(out)
        print(f"scripts/demo.sh incidents: exit {code}, {seconds:.0f} s (cap 20 min: 1200 s)")
    fragile = read_side("fragile", out / "fragile" / "run")
    tuned = read_side("tuned", out / "tuned" / "run")
    for line in table(fragile, tuned):
        print(line)
    print(figures_line(figures(fragile, tuned)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
