"""benchmarks/abort.py's places where a stop cannot cut anything short, and the
double-signal sweep (docs/verdicts.md, "Stops", rule 2)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from support.harness import cli_env, gameday_argv  # noqa: E402

GAPS_MS = (*range(0, 301, 10), 500, 1000)
HOG_CAP_S = 3600


def start_hog() -> subprocess.Popen[bytes]:
    """stress-ng --cpu 1, bounded to an hour (the caller kills it when done)."""
    if shutil.which("stress-ng") is None:
        raise SystemExit("stress-ng is missing: scripts/install-system-deps.sh bench installs it")
    return subprocess.Popen(["stress-ng", "--cpu", "1", "--timeout", f"{HOG_CAP_S}s", "--quiet"])


def _py(kind: str, name: str, module: str, func: str, **arguments: Any) -> dict[str, Any]:
    provider = {"type": "python", "module": module, "func": func, "arguments": arguments}
    return {"type": kind, "name": name, "provider": provider}


def _experiment(tmp: Path, place: str) -> dict[str, Any]:
    here = str(tmp / "in")
    probe = {**_py("probe", "check", "support.verdictkit", "behave"), "tolerance": True}
    if place == "sweep":  # the undo touches `in`, then takes 2 s
        method = [
            _py(
                "action",
                "leave",
                "support.verdictkit",
                "leave_fault",
                undo_marker=here,
                undo_seconds=2,
            )
        ]
    elif place == "recovery":  # the hypothesis never holds again after the rollback
        probe = {
            **_py(
                "probe",
                "check",
                "support.verdictkit",
                "behave",
                mode="fail",
                marker=here,
                when="after",
                ran=str(tmp / "rolled"),
            ),
            "tolerance": True,
        }
        method = [_py("action", "noop", "support.verdictkit", "behave")]
    else:  # the double-signal runs: a long action, a quick rollback
        method = [_py("action", "nap", "support.verdictkit", "behave", mode="hang", marker=here)]
    return {
        "title": f"stop in {place}",
        "description": "benchmarks/_stops.py",
        "steady-state-hypothesis": {"title": "ok", "probes": [probe]},
        "method": method,
        "rollbacks": [
            _py("action", "rollback", "support.verdictkit", "behave", touch=str(tmp / "rolled"))
        ],
    }


def _start(tmp: Path, place: str, recover: str) -> subprocess.Popen[str]:
    path = tmp / "experiment.json"
    path.write_text(json.dumps(_experiment(tmp, place)))
    return subprocess.Popen(
        gameday_argv(
            "run", "--journal", str(tmp / "journal.json"), "--recover", recover, str(path)
        ),
        env={**cli_env(tmp / "ledger.sqlite3"), "GAMEDAY_LEDGER_MARKERS": str(tmp / "m")},
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait(path: Path, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the run never reached {path.name}: {proc.communicate()[0]}")
        time.sleep(0.01)


def signal_place(place: str, work: Path) -> float:
    """One run with SIGTERM in ``place``; seconds from the moment the stop could act (the
    undo's end in the sweep, the signal in the recovery wait) to the process's exit."""
    tmp = Path(tempfile.mkdtemp(prefix=f"{place}-", dir=work))
    proc = _start(tmp, place, "60")
    _wait(tmp / "in", proc)
    sent = time.time()
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=90)
    exited = time.time()
    journal = json.loads((tmp / "journal.json").read_text())
    if proc.returncode != 2 or journal["gameday"]["outcome"] != "interrupted":
        raise RuntimeError(f"{place}: exit {proc.returncode}\n{output}")
    if place == "sweep":
        undone = max(float(e["closed_at"]) for e in journal["gameday"]["ledger"])
        return exited - max(sent, undone)
    return exited - sent


def _one_double(work: Path, sig: signal.Signals, gap_ms: int) -> str | None:
    """One double signal; why it was wrong, or None."""
    tmp = Path(tempfile.mkdtemp(prefix=f"double-{gap_ms}-", dir=work))
    proc = _start(tmp, "double", "0")
    _wait(tmp / "in", proc)
    proc.send_signal(sig)
    time.sleep(gap_ms / 1000)
    if proc.poll() is None:
        proc.send_signal(sig)
    output, _ = proc.communicate(timeout=60)
    try:
        journal = json.loads((tmp / "journal.json").read_text())
    except (OSError, ValueError):
        return f"exit {proc.returncode}, no journal"
    said = journal.get("gameday", {}).get("exit_code")
    if proc.returncode != 2 or said != 2 or not (tmp / "rolled").exists():
        return f"exit {proc.returncode}, journal {said}: {output[-300:]}"
    return None


def double_signal_sweep(work: Path) -> int:
    """SIGTERM+SIGTERM and SIGINT+SIGINT at every gap of :data:`GAPS_MS`; wrong exits."""
    wrong = 0
    for sig in (signal.SIGTERM, signal.SIGINT):
        for gap in GAPS_MS:
            why = _one_double(work, sig, gap)
            if why is not None:
                wrong += 1
                print(f"double {sig.name} {gap} ms: WRONG {why}", flush=True)
    print(f"double signals: {2 * len(GAPS_MS)} runs, {wrong} wrong exit(s)", flush=True)
    return wrong
