"""Benchmark: from a stop condition's breach to the start of the rollback, wherever the run is.

A real Prometheus (Debian's) scrapes an in-process exporter every 250 ms; the
abort plan checks one gauge every 250 ms. Each trial is one real ``gameday run
--abort-on`` in a subprocess: the benchmark waits until the run is in the place
under test, waits a random 0.2-1.5 s more, raises the gauge over the line
(the breach), and reads the time the first rollback activity wrote (for
``settling``, where nothing was injected and nothing is rolled back, the time
the process exited: an upper bound). Places:

* ``python-action``: a Python action sleeping 30 s;
* ``process-action``: ``sh -c 'touch M; sleep 30'`` (a process through a shell);
* ``pause-before`` / ``pause-after``: a 30 s ``pauses.before`` / ``pauses.after``;
* ``probe``: a Python probe sleeping 30 s in the method;
* ``steady-state-after``: the steady state after the method (run by Chaos Toolkit
  *before* the rollbacks: the fault is still on), a Python probe sleeping 30 s;
* ``python-busy-action``: a Python action computing for 30 s, never sleeping;
* ``settling``: ``--settle 30`` with a hypothesis that never holds;
* ``batch-gap``: two experiments in one run; the breach comes as the first one
  rolls back, the time is the second one's rollback.

After each trial, leftover processes are counted from /proc: any process whose
arguments hold the trial's directory or its unique sleep time. Every trial must
end with exit 2 and the outcome ``aborted`` (else it counts as a failure).

Then the places where a stop cannot cut anything short (benchmarks/_stops.py):
``sweep`` (SIGTERM while the ledger sweep's undo runs: from the undo's end to the
exit, no recovery wait) and ``recovery`` (SIGTERM during the recovery wait: from
the signal to the exit); and the double-signal sweep: SIGTERM then SIGTERM (and
SIGINT then SIGINT) at every gap from 0 to 300 ms in 10 ms steps, 500 and 1,000 ms,
each run must exit 2 with a journal that says so (wrong exits are counted). All of
it runs under ``stress-ng --cpu 1`` (this 2-core machine made busy on purpose).

Run: .venv/bin/python benchmarks/abort.py [--trials 20]
Last line: abort p95_s=<s> max_s=<s> leftover_processes=<n> double_signal_wrong_exits=<n>
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from _stops import double_signal_sweep, signal_place, start_hog  # noqa: E402
from support.exporter import start_exporter  # noqa: E402
from support.harness import cli_env, gameday_argv  # noqa: E402
from support.leftovers import marked_sleep, running_with_argument  # noqa: E402

from chaos_ext._core.percentile import percentile  # noqa: E402
from chaos_ext._products.sandbox.servers import prometheus  # noqa: E402

SCRAPE = "250ms"
HOLD_S = 30  # every place would last this long without the stop condition
PLACES = (
    "python-action",
    "process-action",
    "pause-before",
    "pause-after",
    "probe",
    "steady-state-after",
    "python-busy-action",
    "settling",
    "batch-gap",
)


def _py(kind: str, name: str, module: str, func: str, **arguments: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "name": name,
        "provider": {"type": "python", "module": module, "func": func, "arguments": arguments},
    }


def _mark(name: str, path: Path) -> dict[str, Any]:
    return _py("action", name, "support.timekit", "mark_time", path=str(path))


def _shell(name: str, script: str, kind: str = "action") -> dict[str, Any]:
    provider = {"type": "process", "path": "sh", "arguments": f"-c '{script}'"}
    return {"type": kind, "name": name, "provider": provider}


def _experiment(tmp: Path, place: str, sleep: str, url: str) -> dict[str, Any]:
    """The experiment of one place; ``tmp/in`` appears when the run is in that place."""
    here, nap = tmp / "in", _py("action", "nap", "support.faultkit", "nap", seconds=HOLD_S)
    methods: dict[str, list[Any]] = {
        "python-action": [_mark("enter", here), nap],
        "process-action": [_shell("shell", f"touch {here}; sleep {sleep}")],
        "pause-before": [
            _mark("enter", here),
            {**_mark("later", tmp / "x"), "pauses": {"before": HOLD_S}},
        ],
        "pause-after": [{**_mark("enter", here), "pauses": {"after": HOLD_S}}],
        "probe": [
            _mark("enter", here),
            _py("probe", "nap", "support.faultkit", "nap", seconds=HOLD_S),
        ],
        "steady-state-after": [_mark("inject", tmp / "ran")],
        "python-busy-action": [
            _py("action", "busy", "support.timekit", "busy", seconds=HOLD_S, marker=str(here))
        ],
        "settling": [_mark("inject", tmp / "x")],
        "batch-gap": [nap],
    }
    experiment: dict[str, Any] = {
        "title": f"abort in {place}",
        "description": "benchmarks/abort.py",
        "configuration": {"prometheus_url": url},
        "method": methods[place],
        "rollbacks": [_mark("rollback", tmp / "rb")],
    }
    if place == "settling":
        never = {**_shell("never-steady", f"touch {here}; exit 1", "probe"), "tolerance": 0}
        experiment["steady-state-hypothesis"] = {"title": "never", "probes": [never]}
    if place == "steady-state-after":
        slow = _py(
            "probe",
            "slow-check",
            "support.verdictkit",
            "behave",
            mode="hang",
            seconds=HOLD_S,
            marker=str(here),
            when="after",
            ran=str(tmp / "ran"),
        )
        experiment["steady-state-hypothesis"] = {
            "title": "ok",
            "probes": [{**slow, "tolerance": True}],
        }
    return experiment


def _write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(document))
    return path


def _wait(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def _files(tmp: Path, place: str, sleep: str, url: str) -> list[str]:
    main = _write(tmp / "experiment.json", _experiment(tmp, place, sleep, url))
    if place != "batch-gap":
        return [str(main)]
    first = tmp / "first"
    first.mkdir()
    quick = {
        "title": "first of the batch",
        "description": "-",
        "configuration": {"prometheus_url": url},
        "method": [_mark("noop", first / "x")],
        "rollbacks": [_mark("rollback", tmp / "in")],
    }
    return [str(_write(tmp / "a-first.json", quick)), str(main)]


def _p95(values: list[float]) -> float:
    return percentile(values, 95) or 0.0


def trial(place: str, url: str, gauge: Any, plan: Path, work: Path) -> tuple[float, int, str]:
    """One run; (breach -> rollback start in s, leftover processes, outcome)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"{place}-", dir=work))
    sleep = marked_sleep()
    gauge.set(0)
    time.sleep(0.6)  # two scrapes: the condition is steady again
    extra = ["--settle", str(HOLD_S)] if place == "settling" else []
    env = {**cli_env(tmp / "ledger.sqlite3"), "GAMEDAY_LEDGER_MARKERS": str(tmp / "markers")}
    proc = subprocess.Popen(
        gameday_argv(
            "run",
            "--journal-dir",
            str(tmp),
            "--abort-on",
            str(plan),
            *extra,
            *_files(tmp, place, sleep, url),
        ),
        env=env,
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        if not _wait((tmp / "in").exists, 60):
            raise RuntimeError(f"{place}: the run never got there")
        if place != "batch-gap":
            time.sleep(random.uniform(0.2, 1.5))  # a random moment
        gauge.set(1)
        breach = time.time()
        output, _ = proc.communicate(timeout=HOLD_S + 30)
        exited = time.time()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    journal = json.loads((tmp / "journal-experiment.json").read_text())
    outcome = journal["gameday"]["outcome"] if proc.returncode == 2 else f"exit {proc.returncode}"
    if outcome != "aborted":
        sys.stderr.write(output)
    time.sleep(0.2)
    left = {*running_with_argument(str(tmp)), *running_with_argument(sleep)}
    # settling: nothing was injected, so nothing is rolled back; the run's exit is when it
    # stopped (an upper bound: the journal's writing and the interpreter's exit included)
    stopped = exited if place == "settling" else float((tmp / "rb").read_text())
    return stopped - breach, len(left), outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="trials per place (20)")
    args = parser.parse_args()
    hog = start_hog()
    exporter = start_exporter()
    gauge = exporter.gauge("gameday_bench_abort")
    latencies: list[float] = []
    leftover, failures = 0, 0
    with (
        tempfile.TemporaryDirectory(prefix="bench-abort-") as work,
        prometheus.start(targets=[exporter.target], scrape_interval=SCRAPE) as prom,
    ):
        prom.wait_scraped(timeout=30)
        plan = Path(work) / "plan.yaml"
        plan.write_text(
            yaml.safe_dump(
                {
                    "interval_seconds": 0.25,
                    "conditions": [
                        {
                            "name": "bench",
                            "promql": "max(gameday_bench_abort)",
                            "tolerance": {"op": "<", "threshold": 0.5},
                        }
                    ],
                }
            )
        )
        print(f"{'place':<16}{'median s':>10}{'p95 s':>8}{'max s':>8}{'left':>6}{'failed':>8}")
        for place in PLACES:
            runs = [trial(place, prom.url, gauge, plan, Path(work)) for _ in range(args.trials)]
            took = [t for t, _, _ in runs]
            left = sum(n for _, n, _ in runs)
            failed = sum(o != "aborted" for _, _, o in runs)
            latencies += took
            leftover += left
            failures += failed
            print(
                f"{place:<16}{statistics.median(took):>10.3f}{_p95(took):>8.3f}"
                f"{max(took):>8.3f}{left:>6}{failed:>8}",
                flush=True,
            )
        for place in ("sweep", "recovery"):
            took = [signal_place(place, Path(work)) for _ in range(args.trials)]
            latencies += took
            print(
                f"{place:<16}{statistics.median(took):>10.3f}{_p95(took):>8.3f}"
                f"{max(took):>8.3f}{'-':>6}{'-':>8}",
                flush=True,
            )
        wrong = double_signal_sweep(Path(work))
    exporter.stop()
    hog.kill()
    hog.wait(timeout=10)
    print(
        f"{len(latencies)} trials, {failures} not aborted; breach = the gauge set on the "
        f"exporter (scrape {SCRAPE}, plan interval 0.25 s); under stress-ng --cpu 1"
    )
    p95 = _p95(latencies)
    print(
        f"abort p95_s={p95:.3f} max_s={max(latencies):.3f} leftover_processes={leftover} "
        f"double_signal_wrong_exits={wrong}"
    )


if __name__ == "__main__":
    main()
