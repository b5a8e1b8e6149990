"""The mutation check (issue 34): a broken undo of each fault kind fails a crash cell and its test.

For each fault kind in turn, its undo handler (the ``@undo_handler`` registry
of :mod:`chaos_ext._core.ledger`) is replaced by a no-op that says it succeeded
(``tests/support/mutant_site/sitecustomize.py``, put on ``PYTHONPATH`` for
this pytest and every CLI it starts, never in the package). Then the kind's
crash-matrix cells and its dedicated tests run in a child pytest; each test
that fails while the mutant actually ran has caught it. A table
``fault kind -> tests that caught the broken undo`` is printed; a kind not
caught by at least one crash cell (when it has a row in the matrix) and one
dedicated test fails the check. A kind registered without a row here fails too.

Marked ``mutation``: not part of the default run (``addopts`` deselects it);
``make mutate`` runs it. About 15 minutes on a busy 2-core host.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.harness import MUTANT_SITE, ROOT, TESTS

import chaos_ext
from chaos_ext._core import helper as _helper
from chaos_ext._core import ledger

_CELL = "tests/crash/test_crash_matrix.py::test_a_crash_in_any_window_leaves_nothing_after_rollback"


def _cells(kind: str, live: str = "after-apply") -> list[str]:
    """A kill while the fault is live, and a failure mid-apply (the action's own undo)."""
    return [f"{_CELL}[{kind}-{live}-kill]", f"{_CELL}[{kind}-mid-apply-raise]"]


# fault kind -> (crash-matrix cells, dedicated tests); netem's matrix row runs in the VM lane
MUTANTS: dict[str, tuple[list[str], list[str]]] = {
    "netem": (
        [],
        [
            "tests/network/test_network_host.py::test_the_ledger_undo_alone_brings_the_saved_tree_back",
        ],
    ),
    "dnsmasq-tcp-hold": (
        _cells("dnsmasq-tcp-hold"),
        [
            "tests/dns/test_dns_saturation.py::"
            "test_sigkill_runner_then_gameday_rollback_releases_the_connections",
        ],
    ),
    "dns-flood": (
        _cells("dns-flood", live="mid-apply"),
        [
            "tests/dns/test_dns_flood.py::test_sigkill_runner_then_gameday_rollback_stops_flood_workers",
        ],
    ),
    "dns-rate-limit": (
        _cells("dns-rate-limit"),
        [
            "tests/dns/test_dns_rate_limit.py::"
            "test_sigkill_of_the_runner_then_gameday_rollback_deletes_the_table",
        ],
    ),
    "db-connections": (
        _cells("db-connections"),
        [
            "tests/db/test_db_exhaust.py::"
            "test_numeric_target_with_keepalive_then_undo_returns_to_baseline",
        ],
    ),
    "http-load": (
        _cells("http-load"),
        [
            "tests/load/test_load_rollback.py::"
            "test_sigkill_of_the_runner_then_gameday_rollback_stops_the_load",
            "tests/load/test_load_job.py::test_sigkill_of_the_runner_then_gameday_rollback_deletes_the_job",
        ],
    ),
    "node-drain": (
        _cells("node-drain"),
        [
            "tests/node/test_node_rollback.py::"
            "test_sigkill_mid_drain_then_rollback_uncordons_exactly_the_drained_nodes",
        ],
    ),
    "sidecar-template": (
        _cells("sidecar-template"),
        [
            "tests/sidecar/test_sidecar_template.py::"
            "test_change_then_undo_restores_the_configmap_byte_for_byte",
        ],
    ),
    "fault-window": (
        [],
        [
            "tests/reporting/test_reporting_fault_windows.py::"
            "test_gameday_rollback_after_sigkill_removes_the_group",
        ],
    ),
}
# kinds whose undo is a no-op by design, with the reason
EXEMPT = {"sidecar-rollout": "a rollout is the remedy, not a fault: its undo only says so"}
KIND_S = 900  # one kind's child pytest: the slowest (http-load, 4 tests) took about 200 s


def _registered_kinds() -> set[str]:
    for info in pkgutil.walk_packages(chaos_ext.__path__, "chaos_ext."):
        importlib.import_module(info.name)  # importing every module registers every undo handler
    handlers = ledger._UNDO_HANDLERS.items()
    return {kind for kind, undo in handlers if undo.__module__.startswith("chaos_ext.")}


def _caught(kind: str, nodeids: list[str], tmp_path: Path) -> tuple[dict[str, str], int]:
    """Run ``nodeids`` with ``kind``'s undo a no-op: each test's outcome, and the mutant's calls."""
    junit, calls = tmp_path / f"{kind}.xml", tmp_path / f"{kind}.calls"
    env = {
        **os.environ,
        "GAMEDAY_MUTANT_UNDO": kind,
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
            *nodeids,
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=KIND_S,
        check=False,
    )
    outcomes: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):  # noqa: S314 - written by our child
        name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        failed = case.find("failure") is not None or case.find("error") is not None
        outcomes[name] = (
            "failed" if failed else "skipped" if case.find("skipped") is not None else "passed"
        )
    made = calls.read_text().splitlines() if calls.exists() else []
    for line in made:  # the faults the mutant left: helpers stopped for real (the rest is gone
        _helper.stop_helpers(line.split()[2])  # with the child's servers, namespaces, emulator)
    return outcomes, len(made)


def _hit(nodeid: str, failed: set[str]) -> bool:
    """Whether ``nodeid`` (or one of its parametrized cases, e.g. ``[postgresql]``) failed."""
    return any(f == nodeid or f.startswith(f"{nodeid}[") for f in failed)


@pytest.mark.mutation
@pytest.mark.timeout(KIND_S * len(MUTANTS) + 120)
def test_every_broken_undo_is_caught_by_a_crash_cell_and_its_own_test(tmp_path: Path) -> None:
    assert _registered_kinds() == set(MUTANTS) | set(EXEMPT), "a kind without a mutation row"
    rows, problems = [], []
    for kind, (cells, dedicated) in MUTANTS.items():
        outcomes, calls = _caught(kind, [*cells, *dedicated], tmp_path)
        failed = {n for n, o in outcomes.items() if o == "failed"}
        ran = {n for n, o in outcomes.items() if o != "skipped"}
        caught_cells = [c for c in cells if _hit(c, failed)]
        caught_own = [d for d in dedicated if _hit(d, failed)]
        short = [n.rsplit("::", 1)[1] for n in [*caught_cells, *caught_own]]
        rows.append(f"{kind:18} mutant ran {calls:2}x  caught by: {', '.join(short) or '-'}")
        if calls == 0:
            problems.append(f"{kind}: the no-op undo never ran ({len(ran)} test(s) ran)")
        if cells and not caught_cells:
            problems.append(f"{kind}: no crash-matrix cell caught its broken undo")
        if not caught_own:
            problems.append(f"{kind}: its dedicated test did not catch its broken undo")
    print("\nfault kind -> tests that caught the broken undo")  # noqa: T201 - the table is the result
    print("\n".join(rows))  # noqa: T201
    for kind, why in EXEMPT.items():
        print(f"{kind:18} exempt: {why}")  # noqa: T201
    assert not problems, "\n".join(problems)
