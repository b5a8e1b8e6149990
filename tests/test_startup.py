"""Start-up stays light: what `gameday --help` and `gameday validate` import.

Each command runs in a fresh interpreter, which writes ``sys.modules`` to a file
when it ends (``python -X importtime`` misses what ``importlib.import_module``
loads, as the lazy subcommands are). Three checks:

* modules that must not be imported (heavy libraries and the sandbox);
* a budget in modules, which does not depend on how busy the machine is
  (measured: --help about 106, validate of one file about 534; budgets leave
  room for small growth, not for a new heavy dependency);
* a budget in time against an anchor measured in the same test: the import
  time of `gameday --help` is at most half that of `chaos --help`.

Importing any domain's ``actions``/``probes`` module (as ``chaos discover`` and
``chaos run`` do) must not pull in matplotlib or the sandbox either.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from support.harness import ROOT, cli_env

import chaos_ext

HEAVY = (
    "matplotlib",
    "scipy",
    "numpy",
    "kubernetes",
    "pyroute2",
    "paramiko",
    "chaos_ext._products.sandbox",
)
NEVER_FROM_ACTIVITIES = ("matplotlib", "chaos_ext._products.sandbox")
HELP_MODULES_BUDGET = 160
VALIDATE_MODULES_BUDGET = 750


def _importtime(argv: list[str], tmp_path: Path) -> list[tuple[str, int]]:
    """``(module as indented by the report, cumulative µs)`` of a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
        env=cli_env(tmp_path / "ledger.sqlite3"),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "cumulative" not in line:
            _, cumulative, name = line.removeprefix("import time:").split("|")
            rows.append((name, int(cumulative)))
    return rows


_DUMP = """\
import atexit, json, runpy, sys
out, argv = sys.argv[1], sys.argv[2:]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = argv
if argv[0] == "-m":
    sys.argv = ["gameday", *argv[2:]]
    runpy.run_module(argv[1], run_name="__main__")
else:
    exec(argv[1])
"""


def _imports(argv: list[str], tmp_path: Path) -> set[str]:
    """The modules loaded by a fresh interpreter running ``argv`` (``-m MOD ...`` or
    ``-c CODE``)."""
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _DUMP, str(out), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
        env=cli_env(tmp_path / "ledger.sqlite3"),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(out.read_text()))


def _total_us(argv: list[str], tmp_path: Path) -> int:
    """Total import time: the cumulative times of the top-level imports, summed."""
    rows = _importtime(argv, tmp_path)
    return sum(us for name, us in rows if not name.startswith("  "))  # " x": top level


# the command's own entry (`python -m chaos_ext.cli.main` runs it through cli.entry, whose
# stop handler is installed before it imports cli.main)
ENTRY = ("chaos_ext.cli.entry", "chaos_ext.cli.main")


def _heavy(modules: set[str], heavy: tuple[str, ...] = HEAVY) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(f"{h}.") for h in heavy))


def test_help_imports_no_subcommand_and_nothing_heavy(tmp_path: Path) -> None:
    modules = _imports(["-m", "chaos_ext.cli.main", "--help"], tmp_path)
    assert _heavy(modules, (*HEAVY, "chaoslib", "rich", "chaos_ext._runner.execute")) == []
    commands = [m for m in modules if m.startswith("chaos_ext.cli.") and m not in ENTRY]
    assert commands == [], f"--help imported subcommand modules: {commands}"
    assert len(modules) <= HELP_MODULES_BUDGET, f"{len(modules)} modules for --help"


def test_validate_one_file_imports_nothing_heavy(tmp_path: Path) -> None:
    argv = ["-m", "chaos_ext.cli.main", "validate", "experiments/ledger-clean.json"]
    modules = _imports(argv, tmp_path)
    assert _heavy(modules) == []
    assert _heavy(modules, ("rich",)) == [], "off a terminal, validate prints without rich"
    others = [m for m in modules if m.startswith("chaos_ext.cli.") and m not in ENTRY]
    assert sorted(others) == [
        "chaos_ext.cli._admission",
        "chaos_ext.cli._common",
        "chaos_ext.cli._options",
        "chaos_ext.cli.validate",
    ]
    assert len(modules) <= VALIDATE_MODULES_BUDGET, f"{len(modules)} modules for validate"


def test_help_import_time_is_at_most_half_of_chaos_help(tmp_path: Path) -> None:
    chaos = str(Path(sys.executable).parent / "chaos")
    ours, theirs = [], []
    for _ in range(3):  # paired, alternating: both see the same load
        ours.append(_total_us(["-m", "chaos_ext.cli.main", "--help"], tmp_path))
        theirs.append(_total_us([chaos, "--help"], tmp_path))
    ratio = statistics.median(ours) / statistics.median(theirs)
    assert ratio <= 0.5, f"gameday --help imports: {ratio:.2f}x chaos --help's ({ours}, {theirs})"


@pytest.mark.parametrize("module", [m for m, _ in chaos_ext.activity_modules()])
def test_activity_module_imports_no_charts_and_no_sandbox(module: str, tmp_path: Path) -> None:
    modules = _imports(["-c", f"import {module}"], tmp_path)
    assert module in modules
    assert _heavy(modules, NEVER_FROM_ACTIVITIES) == []


def test_help_lists_every_command_with_the_line_its_module_registers() -> None:
    from chaos_ext.cli import COMMANDS  # noqa: PLC0415
    from chaos_ext.cli.main import build_parser  # noqa: PLC0415

    full = build_parser()  # every module registers: the help lines they declare
    sub = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    declared = {action.dest: action.help for action in sub._choices_actions}
    assert declared == {c.name: c.help for c in COMMANDS}
    lazy = build_parser(["--help"]).format_help()
    assert lazy == full.format_help()
    assert "exit codes (run, gate" in lazy


@pytest.mark.parametrize(
    ("argv", "chosen"),
    [
        (["run", "x.json"], "run"),
        (["--ledger", "run", "rollback"], "rollback"),  # a ledger file named "run"
        (["--led", "/tmp/l", "-v", "validate", "x.json"], "validate"),
        (["--ledger=/tmp/l", "--debug", "ledger", "--all"], "ledger"),
        (["--help"], None),
        (["--", "run"], None),
    ],
)
def test_the_chosen_command_is_the_first_word_after_the_global_options(
    argv: list[str], chosen: str | None
) -> None:
    from chaos_ext.cli.main import chosen_command  # noqa: PLC0415

    assert chosen_command(argv) == chosen


def test_rollback_is_registered_by_the_ledger_module(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "chaos_ext.cli.main", "rollback", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
        env=cli_env(tmp_path / "ledger.sqlite3"),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: gameday rollback")
