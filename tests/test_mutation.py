"""The mutation check (issue 34): a broken undo of each fault kind fails a crash cell and its test.

For each fault kind in turn, its undo handler (the ``@undo_handler`` registry
of :mod:`chaos_ext._core.ledger`) is replaced by a no-op that says it succeeded
(``tests/support/mutant_site/sitecustomize.py``, put on ``PYTHONPATH`` for
this pytest and every CLI it starts, never in the package). Then the kind's
crash-matrix cells and its dedicated tests run in a child pytest (netem's
cells, which need a kernel with netem, in the VM lane's guest: a killed
``gameday run`` then ``gameday rollback``, and a failed apply); each test
that fails while the mutant actually ran has caught it. A table
``fault kind -> tests that caught the broken undo`` is printed; a kind not
caught by at least one crash cell (when it has a row in the matrix) and one
dedicated test fails the check. A kind registered without a row here fails too.

The second check does the same for every rollback activity (the activities
an experiment puts in its ``rollbacks``: ``remove_latency``,
``release_dnsmasq_tcp``, ``stop_dns_flood``, ``remove_dns_rate_limit``,
``release_connections``, ``uncordon_drained_nodes``,
``restore_sidecar_template``, ``stop_http_load``, ``rollback_faults``): each in
turn becomes a no-op with the same signature that undoes nothing
(``GAMEDAY_MUTANT_ROLLBACK``), and at least one of its tests must fail. A
``gameday run`` sweeps what its rollbacks left, so only a test that calls the
activity or reads its result can catch it; a rollback activity found by
discovery without a row here fails the check.

Marked ``mutation``: not part of the default run (``addopts`` deselects it);
``make mutate`` runs it. About 15 minutes on a busy 2-core host for the undo
handlers, 3-4 more for the rollback activities (199 s at load 11).
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
from chaos_ext._core.contract import role_of

_CELL = "tests/crash/test_crash_matrix.py::test_a_crash_in_any_window_leaves_nothing_after_rollback"


def _cells(kind: str, live: str = "after-apply") -> list[str]:
    """A kill while the fault is live, and a failure mid-apply (the action's own undo)."""
    return [f"{_CELL}[{kind}-{live}-kill]", f"{_CELL}[{kind}-mid-apply-raise]"]


_NETEM_CELL = (
    "tests/crash/test_crash_netem_vm.py::"
    "test_a_killed_gameday_run_then_gameday_rollback_leaves_the_tree_as_it_was"
)
# netem's crash cells need a kernel with netem: they run in the VM lane (``_caught_in_vm``)
VM_CELLS = {"netem": [f"{_NETEM_CELL}[after-apply]", f"{_NETEM_CELL}[mid-apply-raise]"]}
_ORPHANS = "tests/test_orphan_scan.py::"
# fault kind -> (crash-matrix cells, dedicated tests)
MUTANTS: dict[str, tuple[list[str], list[str]]] = {
    "netem": (
        VM_CELLS["netem"],
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
    # the undo of what `gameday rollback --orphans` removes without a ledger (no crash cell:
    # nothing injects them; the scan finds a dead run's leftovers)
    "helper-orphan": (
        [],
        [
            f"{_ORPHANS}test_local_orphans_are_found_without_a_ledger_and_removed",
            "tests/db/test_db_orphans.py::test_hold_sessions_are_found_by_name_without_a_ledger_and_ended",
        ],
    ),
    "netem-orphan": ([], [f"{_ORPHANS}test_local_orphans_are_found_without_a_ledger_and_removed"]),
    "db-session-orphan": (
        [],
        [
            "tests/db/test_db_orphans.py::test_hold_sessions_are_found_by_name_without_a_ledger_and_ended"
        ],
    ),
}
# kinds whose undo is a no-op by design, with the reason
EXEMPT = {"sidecar-rollout": "a rollout is the remedy, not a fault: its undo only says so"}
_DNS = "tests/dns/"
# rollback activity (module:func) -> the tests that call it or read its result
ROLLBACK_MUTANTS: dict[str, list[str]] = {
    "chaos_ext.network.actions:remove_latency": [
        "tests/network/test_network_host.py::test_remove_latency_without_a_ledger_entry",
        "tests/network/test_network_host.py::test_remove_latency_leaves_a_live_runs_delay_alone",
    ],
    "chaos_ext.dns.actions:release_dnsmasq_tcp": [
        f"{_DNS}test_dns_saturation.py::"
        "test_holding_20_connections_fails_tcp_not_udp_and_undo_restores_tcp",
    ],
    "chaos_ext.dns.actions:stop_dns_flood": [
        f"{_DNS}test_dns_flood.py::test_stop_dns_flood_stops_a_background_floods_workers",
    ],
    "chaos_ext.dns.actions:remove_dns_rate_limit": [
        f"{_DNS}test_dns_rate_limit.py::"
        "test_limit_holds_100_pps_when_1000_qps_are_offered_and_undo_restores",
    ],
    "chaos_ext.db.actions:release_connections": [
        "tests/db/test_db_exhaust.py::"
        "test_numeric_target_with_keepalive_then_undo_returns_to_baseline",
    ],
    "chaos_ext.node.actions:uncordon_drained_nodes": [
        "tests/node/test_node_drain.py::test_undo_uncordons_exactly_what_the_drain_cordoned",
    ],
    "chaos_ext.sidecar.actions:restore_sidecar_template": [
        "tests/sidecar/test_sidecar_template.py::"
        "test_change_then_undo_restores_the_configmap_byte_for_byte",
    ],
    "chaos_ext.load.actions:stop_http_load": [
        "tests/load/test_load_actions.py::"
        "test_background_load_is_in_the_ledger_and_stopped_by_the_rollback",
    ],
    "chaos_ext.faults.actions:rollback_faults": [
        "tests/test_rollback_scope.py::"
        "test_a_live_runs_fault_is_never_undone_a_dead_runs_only_when_asked",
        "tests/sidecar/test_sidecar_template.py::test_whole_keys_new_keys_and_a_later_edit",
    ],
}
KIND_S = 900  # one kind's child pytest: the slowest (http-load, 4 tests) took about 200 s


def _registered_kinds() -> set[str]:
    for info in pkgutil.walk_packages(chaos_ext.__path__, "chaos_ext."):
        importlib.import_module(info.name)  # importing every module registers every undo handler
    registry = ledger.UNDO_HANDLERS
    return {
        k for k in registry.kinds() if registry.registered(k).__module__.startswith("chaos_ext.")
    }


def _caught(
    name: str, nodeids: list[str], tmp_path: Path, mutant: dict[str, str]
) -> tuple[dict[str, str], int]:
    """Run ``nodeids`` with the ``mutant`` environment: each test's outcome, the mutant's calls."""
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
            *nodeids,
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


def _hit(nodeid: str, failed: set[str]) -> bool:
    """Whether ``nodeid`` (or one of its parametrized cases, e.g. ``[postgresql]``) failed."""
    return any(f == nodeid or f.startswith(f"{nodeid}[") for f in failed)


@pytest.mark.mutation
@pytest.mark.timeout(KIND_S * len(MUTANTS) + 120)
def test_every_broken_undo_is_caught_by_a_crash_cell_and_its_own_test(tmp_path: Path) -> None:
    assert _registered_kinds() == set(MUTANTS) | set(EXEMPT), "a kind without a mutation row"
    rows, problems = [], []
    for kind, (cells, dedicated) in MUTANTS.items():
        mutant = {"GAMEDAY_MUTANT_UNDO": kind}
        host = [n for n in [*cells, *dedicated] if n not in VM_CELLS.get(kind, [])]
        outcomes, calls = _caught(kind, host, tmp_path, mutant)
        if kind in VM_CELLS:
            in_vm, vm_calls = _caught_in_vm(VM_CELLS[kind], tmp_path, mutant)
            outcomes, calls = {**outcomes, **in_vm}, calls + vm_calls
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


def _rollback_activities() -> set[str]:
    """Every activity that declares the rollback role, as ``module:func``."""
    found = set()
    for module_name, _kind in chaos_ext.activity_modules():
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            if (role_of(getattr(module, name)) or {}).get("role") == "rollback":
                found.add(f"{module_name}:{name}")
    return found


@pytest.mark.mutation
@pytest.mark.timeout(KIND_S * len(ROLLBACK_MUTANTS) + 120)
def test_every_no_op_rollback_activity_is_caught_by_one_of_its_tests(tmp_path: Path) -> None:
    assert _rollback_activities() == set(ROLLBACK_MUTANTS), "a rollback activity without a row"
    rows, problems = [], []
    for activity, tests in ROLLBACK_MUTANTS.items():
        name = activity.rsplit(":", 1)[1]
        outcomes, calls = _caught(name, tests, tmp_path, {"GAMEDAY_MUTANT_ROLLBACK": activity})
        failed = {n for n, o in outcomes.items() if o == "failed"}
        caught = [t.rsplit("::", 1)[1] for t in tests if _hit(t, failed)]
        rows.append(f"{name:26} mutant ran {calls:2}x  caught by: {', '.join(caught) or '-'}")
        if calls == 0:
            problems.append(f"{name}: the no-op rollback never ran")
        if not caught:
            problems.append(f"{name}: no test caught its no-op")
    print("\nrollback activity -> tests that caught its no-op")  # noqa: T201 - the result
    print("\n".join(rows))  # noqa: T201
    assert not problems, "\n".join(problems)
