"""The mutation check (issue 34): a broken undo of each fault kind fails a crash cell and its test.

For each declared fault kind in turn (``FAULT_KINDS``: nobody lists them
here), its undo is replaced by a no-op that says it succeeded
(``tests/support/mutant_site/sitecustomize.py``, put on ``PYTHONPATH`` for
this pytest and every CLI it starts, never in the package). Then the tests
marked ``undoes(kind)`` run in a child pytest (``pytest --undoes KIND``):
the crash-matrix cells where the fault is live (the matrix marks them
itself, from its row for the kind) and the kind's dedicated tests; netem's
cells, which need a kernel with netem, run in the VM lane's guest. Each test
that fails while the mutant actually ran has caught it. A table
``fault kind -> tests that caught the broken undo`` is printed; a kind not
caught by at least one crash cell (when it has a row in the matrix) and one
dedicated test fails the check, and so does a kind no test is marked for.

The second check does the same for every rollback activity: each kind's
declared ``rollback`` (and ``rollback_faults``, which undoes every kind) in
turn becomes a no-op with the same signature that undoes nothing
(``GAMEDAY_MUTANT_ROLLBACK``), and at least one of the tests marked
``rolls_back(kind)`` must fail. A ``gameday run`` sweeps what its rollbacks
left, so only a test that calls the activity or reads its result can catch
it; a rollback activity found by discovery that no kind declares fails the
check. ``GAMEDAY_MUTATE_ONLY=kind,kind`` limits both checks to those kinds.

Marked ``mutation``: not part of the default run (``addopts`` deselects it);
``make mutate`` runs it. About 15 minutes on a busy 2-core host for the undo
handlers, 3-4 more for the rollback activities (199 s at load 11).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.harness import MUTANT_SITE, ROOT, TESTS

import chaos_ext
from chaos_ext._core import helper as _helper
from chaos_ext._core.contract import role_of
from chaos_ext._core.ledger import FAULT_KINDS, FaultKind

_NETEM_CELL = (
    "tests/crash/test_crash_netem_vm.py::"
    "test_a_killed_gameday_run_then_gameday_rollback_leaves_the_tree_as_it_was"
)
# netem's crash cells need a kernel with netem: they run in the VM lane (``_caught_in_vm``)
VM_CELLS = {"netem": [f"{_NETEM_CELL}[after-apply]", f"{_NETEM_CELL}[mid-apply-raise]"]}
_CRASH = "tests/crash/"
# rollback activities that are no kind's own, with the tests that call them
ROLLBACK_EXTRA: dict[str, list[str]] = {
    "chaos_ext.faults.actions:rollback_faults": [
        "tests/test_rollback_scope.py::"
        "test_a_live_runs_fault_is_never_undone_a_dead_runs_only_when_asked",
        "tests/sidecar/test_sidecar_template.py::test_whole_keys_new_keys_and_a_later_edit",
    ],
}
_ONLY = {k for k in os.environ.get("GAMEDAY_MUTATE_ONLY", "").split(",") if k}


def _kinds() -> list[FaultKind]:
    """Every declared kind whose undo can be broken (a remedy's undo only says so)."""
    return [
        k for k in FAULT_KINDS.load_all() if k.role != "remedy" and (not _ONLY or k.name in _ONLY)
    ]


KIND_S = 900  # one kind's child pytest: the slowest (http-load, 4 tests) took about 200 s


def _caught(
    name: str, selection: list[str], tmp_path: Path, mutant: dict[str, str]
) -> tuple[dict[str, str], int]:
    """Run ``selection`` (pytest arguments) with the ``mutant`` environment: each test's
    outcome, the mutant's calls."""
    junit, calls = tmp_path / f"{name}.xml", tmp_path / f"{name}.calls"
    env = {
        **os.environ,
        **mutant,
        "GAMEDAY_MUTANT_LOG": str(calls),
        "PYTHONPATH": os.pathsep.join([str(MUTANT_SITE), str(TESTS), str(ROOT)]),
    }
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "",
            "--timeout=150",
            f"--junitxml={junit}",
            *selection,
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=KIND_S,
        check=False,
    )
    outcomes = _outcomes(junit)
    made = calls.read_text().splitlines() if calls.exists() else []
    for line in made:  # the faults the mutant left: helpers stopped for real (the rest is gone
        if line.split()[1] != "rollback":  # with the child's servers, namespaces, emulator)
            _helper.stop_helpers(line.split()[2])
    return outcomes, len(made)


def _caught_in_vm(
    nodeids: list[str], tmp_path: Path, mutant: dict[str, str]
) -> tuple[dict[str, str], int]:
    """``_caught`` for cells that need a real kernel: run them in the VM lane's guest, the
    mutant site on the guest's ``PYTHONPATH``, its call log written to the share."""
    from chaos_ext._products.sandbox.vm.initramfs import SHARE_IN_GUEST  # noqa: PLC0415
    from chaos_ext._products.sandbox.vm.lane import run_pytest  # noqa: PLC0415
    from chaos_ext._products.sandbox.vm.machine import VMConfig  # noqa: PLC0415

    env = {
        **mutant,
        "GAMEDAY_MUTANT_LOG": f"{SHARE_IN_GUEST}/mutant.calls",
        "PYTHONPATH": os.pathsep.join([str(MUTANT_SITE), str(TESTS), str(ROOT)]),
    }
    lane = run_pytest(
        ["-m", "vm", "--timeout=600", *nodeids],
        config=VMConfig(work_dir=ROOT / ".vm", cwd=ROOT),  # the lane's image cache
        timeout=KIND_S,
        env=env,
    )
    if lane.junit is None:
        return {}, 0  # the guest ran nothing: every cell counts as not caught
    outcomes = _outcomes(lane.junit)
    calls = lane.junit.parent / "mutant.calls"
    return outcomes, len(calls.read_text().splitlines()) if calls.exists() else 0


def _outcomes(junit: Path) -> dict[str, str]:
    """Each test case of a JUnit file: failed, skipped or passed."""
    outcomes: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):  # noqa: S314 - written by our child
        node = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        failed = case.find("failure") is not None or case.find("error") is not None
        outcomes[node] = (
            "failed" if failed else "skipped" if case.find("skipped") is not None else "passed"
        )
    return outcomes


def _undo_row(kind: FaultKind, tmp_path: Path) -> tuple[str, list[str]]:
    mutant = {"GAMEDAY_MUTANT_UNDO": kind.name}
    outcomes, calls = _caught(kind.name, ["--undoes", kind.name, "tests"], tmp_path, mutant)
    if kind.name in VM_CELLS:
        in_vm, vm_calls = _caught_in_vm(VM_CELLS[kind.name], tmp_path, mutant)
        outcomes, calls = {**outcomes, **in_vm}, calls + vm_calls
    ran = {n for n, o in outcomes.items() if o != "skipped"}
    cells = [n for n in outcomes if n.startswith(_CRASH)]
    failed = [n for n, o in outcomes.items() if o == "failed"]
    caught_cells = [n for n in failed if n.startswith(_CRASH)]
    caught_own = [n for n in failed if not n.startswith(_CRASH)]
    short = [n.rsplit("::", 1)[1] for n in [*caught_cells, *caught_own]]
    row = f"{kind.name:18} mutant ran {calls:2}x  caught by: {', '.join(short) or '-'}"
    problems = []
    if not outcomes:
        problems.append(f"{kind.name}: no test is marked undoes({kind.name!r})")
    elif calls == 0:
        problems.append(f"{kind.name}: the no-op undo never ran ({len(ran)} test(s) ran)")
    if cells and not caught_cells:
        problems.append(f"{kind.name}: no crash-matrix cell caught its broken undo")
    if not caught_own:
        problems.append(f"{kind.name}: no dedicated test caught its broken undo")
    return row, problems


@pytest.mark.mutation
@pytest.mark.timeout(KIND_S * 16 + 120)
def test_every_broken_undo_is_caught_by_a_crash_cell_and_its_own_test(tmp_path: Path) -> None:
    rows, problems = [], []
    for kind in _kinds():
        row, trouble = _undo_row(kind, tmp_path)
        rows.append(row)
        problems += trouble
    print("\nfault kind -> tests that caught the broken undo")  # noqa: T201 - the table is the result
    print("\n".join(rows))  # noqa: T201
    for kind in FAULT_KINDS.load_all():
        if kind.role == "remedy":
            print(f"{kind.name:18} exempt: a remedy, not a fault: its undo only says so")  # noqa: T201
    assert not problems, "\n".join(problems)


def _rollback_activities() -> set[str]:
    """Every activity that declares the rollback role, as ``module:func``."""
    found = set()
    for module_name, _kind in chaos_ext.activity_modules():
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            if (role_of(getattr(module, name)) or {}).get("role") == "rollback":
                found.add(f"{module_name}:{name}")
    return found


def _rollback_rows() -> dict[str, list[str]]:
    """rollback activity -> the pytest selection of the tests that call it."""
    rows = {
        f"{k.module}:{k.rollback}": ["--rolls-back", k.name, "tests"]
        for k in _kinds()
        if k.rollback
    }
    if not _ONLY:
        rows.update(ROLLBACK_EXTRA)
    return rows


def test_every_rollback_activity_is_a_kinds_own_or_listed() -> None:
    """A rollback activity nobody declares would never be broken on purpose."""
    declared = {f"{k.module}:{k.rollback}" for k in FAULT_KINDS.load_all() if k.rollback}
    assert _rollback_activities() == declared | set(ROLLBACK_EXTRA)


@pytest.mark.mutation
@pytest.mark.timeout(KIND_S * 10 + 120)
def test_every_no_op_rollback_activity_is_caught_by_one_of_its_tests(tmp_path: Path) -> None:
    rows, problems = [], []
    for activity, selection in _rollback_rows().items():
        name = activity.rsplit(":", 1)[1]
        outcomes, calls = _caught(name, selection, tmp_path, {"GAMEDAY_MUTANT_ROLLBACK": activity})
        caught = [n.rsplit("::", 1)[1] for n, o in outcomes.items() if o == "failed"]
        rows.append(f"{name:26} mutant ran {calls:2}x  caught by: {', '.join(caught) or '-'}")
        if not outcomes:
            problems.append(f"{name}: no test calls it (mark one rolls_back(kind))")
        elif calls == 0:
            problems.append(f"{name}: the no-op rollback never ran")
        if not caught:
            problems.append(f"{name}: no test caught its no-op")
    print("\nrollback activity -> tests that caught its no-op")  # noqa: T201 - the result
    print("\n".join(rows))  # noqa: T201
    assert not problems, "\n".join(problems)
