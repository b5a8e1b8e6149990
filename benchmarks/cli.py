"""Benchmark: how long people wait for gameday's command line, against Chaos Toolkit's.

Each pair runs alternately in the same session (the order swapped every round), as
fresh processes (start-up included, which is the point): ``gameday --help`` vs
``chaos --help``; ``gameday validate FILE`` vs ``chaos validate FILE`` on the same
experiment, for every shipped experiment in turn (``experiments/*.json`` and
``experiments/sandbox/*.json``, 14 files: each imports its own activity modules, so
the ratio differs from file to file); a batch: ``gameday validate`` of those 14
files in one process vs 14 ``chaos validate`` processes (chaos validates one file
per call, so that is what a pipeline pays); ``gameday validate`` of 40 files;
``gameday report`` of a 10-activity journal vs ``chaos report --export-format=html``
(chaostoolkit-reporting, the ``bench`` extra, with pandoc). Reported: the median
wall time of each and the ratio of the medians; CPU time (user+sys) beside it,
steadier on a shared machine. Both run with bytecode caches (in a private
``PYTHONPYCACHEPREFIX``, filled by a warm-up round that is not counted), as
installed packages do.

Run: .venv/bin/python benchmarks/cli.py
Last line: ``cli help_ratio_vs_chaos=<x> validate_ratio_vs_chaos=<x>
validate_ratio_max=<x> validate_cpu_ratio_vs_chaos=<x> validate_batch_ratio_vs_chaos=<x>
validate40_s=<s>`` (``validate_ratio_vs_chaos``: the median over the 14 files of each
file's wall-time ratio, ``validate_ratio_max`` the file where gameday does worst,
``validate_cpu_ratio_vs_chaos`` the median of the CPU-time ratios; goals: help ratio
<= 0.6, validate ratios <= 1.0).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.journals import JournalBuilder  # noqa: E402

ROUNDS = 7
ROUNDS_ONE = 5  # per file, for each of the shipped experiments
ROUNDS_40 = 3
SHIPPED = sorted((ROOT / "experiments").glob("*.json")) + sorted(
    (ROOT / "experiments" / "sandbox").glob("*.json")
)
Timing = tuple[float, float]  # wall seconds, user+sys CPU seconds


def timed(argvs: list[list[str]], env: dict[str, str]) -> Timing:
    """(wall, CPU) of running each argv in turn, as child processes."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    begin = time.perf_counter()
    for argv in argvs:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=300, env=env, check=False, cwd=ROOT
        )
        if done.returncode != 0:
            shown = " ".join(argv[:5])
            raise RuntimeError(f"{shown} ... failed ({done.returncode}): {done.stderr[-800:]}")
    wall = time.perf_counter() - begin
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def paired(
    ours: Callable[[int], list[list[str]]],
    theirs: Callable[[int], list[list[str]]] | None,
    env: dict[str, str],
    rounds: int,
) -> tuple[list[Timing], list[Timing]]:
    """Alternate the two, ``rounds`` times each, the order swapped every round; one warm-up
    round of each is dropped."""
    mine: list[Timing] = []
    other: list[Timing] = []
    for i in range(rounds + 1):
        if theirs is not None and i % 2:
            other.append(timed(theirs(i), env))
        mine.append(timed(ours(i), env))
        if theirs is not None and not i % 2:
            other.append(timed(theirs(i), env))
    return mine[1:], other[1:]


def median(timings: list[Timing]) -> Timing:
    return statistics.median(w for w, _ in timings), statistics.median(c for _, c in timings)


def show(what: str, ours: list[Timing], theirs: list[Timing], peer: str) -> float | None:
    """Print one line per pair; the wall-time ratio of the medians (None: no peer)."""
    wall, cpu = median(ours)
    line = f"{what:<38} gameday {wall:.3f} s (cpu {cpu:.3f} s)"
    if not theirs:
        print(f"{line}; {peer}: not measured")
        return None
    their_wall, their_cpu = median(theirs)
    ratio = wall / their_wall
    theirs_line = f"{peer} {their_wall:.3f} s (cpu {their_cpu:.3f} s)"
    print(f"{line}; {theirs_line}; ratio wall {ratio:.2f}, cpu {cpu / their_cpu:.2f}")
    return ratio


def forty_experiments(work: Path) -> list[Path]:
    """40 valid experiment files: the shipped experiments, copied round-robin."""
    paths = []
    for i in range(40):
        source = SHIPPED[i % len(SHIPPED)]
        path = work / f"{i:02d}-{source.name}"
        path.write_text(source.read_text())
        paths.append(path)
    return paths


def env_nodes(node: object) -> list[dict[str, Any]]:
    """Every ``{"type": "env", "key": ...}`` under ``node``."""
    if isinstance(node, dict):
        found = [node] if node.get("type") == "env" and "key" in node else []
        return found + [n for v in node.values() for n in env_nodes(v)]
    if isinstance(node, list):
        return [n for v in node for n in env_nodes(v)]
    return []


def placeholders(experiment: dict[str, Any]) -> dict[str, str]:
    """Values for the environment variables both validators resolve: every secret's
    (chaoslib reads secrets without their defaults) and configuration without one."""
    values = {n["key"]: str(n.get("default", "1")) for n in env_nodes(experiment.get("secrets"))}
    for n in env_nodes(experiment.get("configuration")):
        if "default" not in n:
            values.setdefault(n["key"], "1")
    return values


def ctk_reporting_problem() -> str | None:
    """Why ``chaos report`` cannot run here (and which package provides it), or None."""
    try:
        import chaosreport  # noqa: F401, PLC0415 - optional, only for the comparison
    except ImportError:
        return "chaostoolkit-reporting is not installed: pip install -e '.[bench]'"
    if shutil.which("pandoc") is None:
        return "pandoc is not installed: apt-get install pandoc"
    return None


def ten_activity_journal(path: Path) -> Path:
    tolerance = {"p99-latency-ms": {"type": "range", "range": [0, 300]}}
    b = JournalBuilder("10-activity game day", tolerance)
    b.check("before", "p99-latency-ms", 120, 0)
    for i in range(10):
        b.activity(f"step-{i}", 1 + i, 0.5, {"done": i}, kind="probe" if i % 2 else "action")
    b.check("after", "p99-latency-ms", 130, 12)
    path.write_text(json.dumps(b.build()))
    return path


def validate_each(
    paths: list[str],
    gameday: list[str],
    chaos_validate: Callable[[str], list[str]],
    env: dict[str, str],
) -> tuple[list[float], list[float]]:
    """``gameday validate FILE`` vs ``chaos validate FILE`` for each file: one line each;
    the wall-time and the CPU-time ratios of each file's medians."""
    ratios, cpu_ratios = [], []
    for path in paths:
        ours, theirs = paired(
            lambda _, p=path: [[*gameday, "validate", p]],
            lambda _, p=path: [chaos_validate(p)],
            env,
            ROUNDS_ONE,
        )
        ratio = show(f"validate {Path(path).name}", ours, theirs, "chaos")
        ratios.append(ratio if ratio is not None else float("nan"))
        cpu_ratios.append(median(ours)[1] / median(theirs)[1])
    return ratios, cpu_ratios


def fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def main() -> None:
    chaos = str(Path(sys.executable).parent / "chaos")
    gameday = [sys.executable, "-m", "chaos_ext.cli.main"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg", COLUMNS="120")
    if not Path(chaos).exists():
        print(f"cli: no chaos command next to {sys.executable} (pip install chaostoolkit)")
        print(
            "cli help_ratio_vs_chaos=n/a validate_ratio_vs_chaos=n/a validate_ratio_max=n/a "
            "validate_cpu_ratio_vs_chaos=n/a validate_batch_ratio_vs_chaos=n/a validate40_s=n/a"
        )
        return
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        work = Path(tmp)
        env["GAMEDAY_LEDGER"] = str(work / "ledger.sqlite3")
        # bytecode as an installed package has it, for both tools alike: compiled in the
        # warm-up round into a private cache (this checkout's own .py files have none)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        many = [str(p) for p in forty_experiments(work)]
        for path in many:
            env.update(placeholders(json.loads(Path(path).read_text())))
        journal = str(ten_activity_journal(work / "journal.json"))
        shipped = [str(p) for p in SHIPPED]

        def chaos_validate(path: str) -> list[str]:
            return [chaos, "--no-log-file", "validate", path]

        def chaos_report(i: int) -> list[list[str]]:
            html = str(work / f"ctk-{i}.html")
            return [[chaos, "--no-log-file", "report", "--export-format=html", journal, html]]

        def gameday_report(i: int) -> list[list[str]]:
            return [[*gameday, "report", journal, "-o", str(work / f"gd-{i}")]]

        ours, theirs = paired(
            lambda _: [[*gameday, "--help"]], lambda _: [[chaos, "--help"]], env, ROUNDS
        )
        help_ratio = show("--help", ours, theirs, "chaos")
        ratios, cpu_ratios = validate_each(shipped, gameday, chaos_validate, env)
        validate_ratio, validate_max = statistics.median(ratios), max(ratios)
        validate_cpu = statistics.median(cpu_ratios)
        print(
            f"validate 1 file: median ratio {validate_ratio:.2f}, max {validate_max:.2f}; "
            f"cpu: median {validate_cpu:.2f}, max {max(cpu_ratios):.2f}"
        )
        ours, theirs = paired(
            lambda _: [[*gameday, "validate", *shipped]],
            lambda _: [chaos_validate(p) for p in shipped],
            env,
            ROUNDS_40,
        )
        n = len(shipped)
        batch_ratio = show(f"validate {n} files", ours, theirs, f"{n} x chaos")
        ours, theirs = paired(
            lambda _: [[*gameday, "validate", *many]],
            lambda _: [chaos_validate(p) for p in many],
            env,
            ROUNDS_40,
        )
        show("validate 40 files", ours, theirs, "40 x chaos")
        validate40 = median(ours)[0]
        problem = ctk_reporting_problem()
        ours, theirs = paired(gameday_report, None if problem else chaos_report, env, ROUNDS_40)
        show("report 10 activities", ours, theirs, problem or "chaos report")
    ratios = (
        f"help_ratio_vs_chaos={fmt(help_ratio)} validate_ratio_vs_chaos={fmt(validate_ratio)} "
        f"validate_ratio_max={fmt(validate_max)} validate_cpu_ratio_vs_chaos={fmt(validate_cpu)} "
        f"validate_batch_ratio_vs_chaos={fmt(batch_ratio)}"
    )
    print(f"cli {ratios} validate40_s={validate40:.2f}")


if __name__ == "__main__":
    main()
