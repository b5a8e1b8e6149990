"""Benchmark: a 1,000-activity journal to HTML, gameday report vs chaostoolkit-reporting.

Both run as their command-line tools on the same journal, alternately, in the
same session: `gameday report JOURNAL -o DIR` and `chaos report
--export-format=html JOURNAL FILE` (chaostoolkit-reporting, which renders
Markdown then converts it with pandoc). Reported: median wall time of each, the
ratio, and the median CPU time (user+sys) of each, steadier on a shared machine.

Run: .venv/bin/python benchmarks/report.py   (needs `pip install -e .[bench]` and pandoc
for the comparison; without them only gameday's own time is measured.)
Last line: report html_1000_s=<median wall seconds of gameday report>
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.journals import JournalBuilder  # noqa: E402

ROUNDS = 3
ACTIVITIES = 1000


def build_journal() -> dict:
    """1,000 method activities (500 actions, 500 probes over 10 metrics), 3 hypothesis
    probes checked before, after and 60 times during, 50 ledger faults."""
    tolerances = {
        "p99-latency-ms": {"type": "range", "range": [0, 300]},
        "error-ratio": {"type": "range", "range": [0, 0.01]},
        "dnsmasq-children": {"type": "range", "range": [0, 19]},
    }
    b = JournalBuilder("1,000-activity game day", tolerances)
    for name in tolerances:
        b.check("before", name, 5, 0)
    for i in range(ACTIVITIES):
        at = 1 + i * 0.5
        if i % 2:
            b.activity(f"measure-{i % 10}", at, 0.2, 100 + (i * 7919) % 50, kind="probe")
        else:
            b.activity("hold-tcp-connections", at, 0.3, {"held": 20, "refused_at": 38 + i % 3})
    for i in range(60):
        b.check("during", "p99-latency-ms", 120 + (i * 37) % 200, 1 + i * 8)
        b.check("during", "error-ratio", ((i * 13) % 20) / 1000, 1.1 + i * 8)
        b.check("during", "dnsmasq-children", 10 + i % 12, 1.2 + i * 8)
    for i in range(50):
        b.fault("dnsmasq-tcp-hold", f"127.0.0.1:{5300 + i}", 1 + i * 10, 6 + i * 10)
    for name in tolerances:
        b.check("after", name, 6, 505)
    b.activity("release-connections", 506, 0.2, {"released": 20}, rollback=True)
    journal = b.build()
    journal.update({"platform": "Linux", "node": "bench"})
    return journal


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, user+sys CPU seconds) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    begin = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, check=False)
    wall = time.perf_counter() - begin
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({done.returncode}): {done.stderr[-800:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def ctk_reporting_problem(bin_dir: Path) -> str | None:
    """Why chaostoolkit-reporting cannot run here, or None when it can."""
    try:
        import chaosreport  # noqa: F401, PLC0415 - optional, only for the comparison
    except ImportError as exc:
        return f"chaostoolkit-reporting is not installed ({exc}); pip install -e '.[bench]'"
    if shutil.which("pandoc") is None:
        return "pandoc is not installed (chaostoolkit-reporting converts Markdown with it)"
    if not (bin_dir / "chaos").exists():
        return f"no chaos command next to {sys.executable}"
    return None


def main() -> None:
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        work = Path(tmp)
        path = work / "journal.json"
        path.write_text(json.dumps(build_journal()))
        size = path.stat().st_size
        print(f"journal: {ACTIVITIES} method activities, {size / 1e6:.1f} MB")
        problem = ctk_reporting_problem(bin_dir)
        ours: list[tuple[float, float]] = []
        theirs: list[tuple[float, float]] = []
        for i in range(ROUNDS):
            ours.append(
                timed(
                    [
                        sys.executable,
                        "-m",
                        "chaos_ext.cli.main",
                        "report",
                        str(path),
                        "-o",
                        str(work / f"gd-{i}"),
                    ],
                    env,
                )
            )
            if problem is None:
                theirs.append(
                    timed(
                        [
                            str(bin_dir / "chaos"),
                            "--no-log-file",
                            "report",
                            "--export-format=html",
                            str(path),
                            str(work / f"ctk-{i}.html"),
                        ],
                        env,
                    )
                )
        html = (work / "gd-0" / "report.html").read_text()
        print(f"gameday report: {html.count('<svg')} inline SVG charts, {len(html) / 1e6:.2f} MB")
        wall = statistics.median(w for w, _ in ours)
        cpu = statistics.median(c for _, c in ours)
        print(f"gameday report          median wall {wall:.2f} s, cpu {cpu:.2f} s ({ROUNDS} runs)")
        if problem is not None:
            print(f"chaostoolkit-reporting  not measured: {problem}")
        else:
            their_wall = statistics.median(w for w, _ in theirs)
            their_cpu = statistics.median(c for _, c in theirs)
            ctk_html = (work / "ctk-0.html").read_text()
            print(
                f"chaostoolkit-reporting  median wall {their_wall:.2f} s, cpu {their_cpu:.2f} s "
                f"({ROUNDS} runs, {len(ctk_html) / 1e6:.2f} MB, "
                f"{ctk_html.count('<img') + ctk_html.count('<svg')} charts)"
            )
            print(f"ratio gameday/ctk: wall {wall / their_wall:.2f}, cpu {cpu / their_cpu:.2f}")
        print(f"report html_1000_s={wall:.2f}")


if __name__ == "__main__":
    main()
