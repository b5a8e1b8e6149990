"""The real-kernel lane: boot Debian's kernel in qemu and run the ``vm`` tests inside it.

The lane counts what it ran (issue 34): the tests it must run are collected
on the host, every test in ``VM_TESTS`` with no marker filter, and the VM's
JUnit file must show each of them passed, no more, no fewer. A test that lost
its ``vm`` marker is deselected inside the VM and fails the lane; the fast
host check below also catches it without booting anything, and catches a
``vm`` test outside ``VM_TESTS`` that the lane would never run.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.vm_lane import LANE_S, VM_TESTS, result

ROOT = Path(__file__).resolve().parents[2]

in_vm = pytest.mark.skipif(os.environ.get("GAMEDAY_IN_VM") == "1", reason="already inside the VM")
no_qemu = pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="no qemu")


@functools.cache  # the two tests share the collection of VM_TESTS
def collected(*args: str) -> set[str]:
    """The node ids ``pytest --collect-only ARGS`` finds on the host."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return {line for line in out.splitlines() if "::" in line and not line.startswith(" ")}


def passed_in(junit: Path) -> tuple[set[str], set[str]]:
    """The node ids the JUnit file shows passed, and those it shows otherwise."""
    passed, other = set(), set()
    for case in ET.parse(junit).getroot().iter("testcase"):  # noqa: S314 - written by the lane
        module, name = case.get("classname", ""), case.get("name", "")
        node = f"{module.replace('.', '/')}.py::{name}"
        bad = any(case.find(tag) is not None for tag in ("failure", "error", "skipped"))
        (other if bad else passed).add(node)
    return passed, other


@in_vm
@pytest.mark.timeout(300)
def test_every_test_in_the_vm_files_is_marked_vm_and_every_vm_test_is_in_them() -> None:
    """The lane runs ``-m vm`` over ``VM_TESTS``: both filters must agree with the whole set."""
    everything = collected(*VM_TESTS)  # no marker filter: what the files hold
    assert everything, "no tests collected from VM_TESTS"
    unmarked = everything - collected("-m", "vm", *VM_TESTS)
    assert not unmarked, f"tests in VM_TESTS without the vm marker (never run): {unmarked}"
    elsewhere = collected("-m", "vm", "tests") - everything
    assert not elsewhere, f"vm tests outside VM_TESTS (the lane never runs them): {elsewhere}"


@pytest.mark.slow
@pytest.mark.timeout(LANE_S + 180 + 120)  # + the host collection
@in_vm
@no_qemu
def test_vm_lane_runs_the_netem_tests_on_a_real_kernel() -> None:
    """The lane runs in the background from the end of collection (support/vm_lane.py)."""
    expected = collected(*VM_TESTS)  # every test in the files, whatever its markers
    lane, _seconds = result(LANE_S)
    details = "\n\n".join(lane.failures) or lane.output[-4000:]
    assert lane.exit_code == 0, f"VM lane failed ({lane.boot_accel}):\n{details}"
    assert lane.junit is not None, lane.output[-2000:]
    passed, other = passed_in(lane.junit)
    assert not other, f"not passed in the VM: {sorted(other)}"
    assert passed == expected, (
        f"missing in the VM: {sorted(expected - passed)}; not expected: {sorted(passed - expected)}"
    )
