"""Run a pytest selection (or any script) inside the micro-VM and bring the results back.

::

    result = run_pytest(["-m", "vm", "tests/network"], config=VMConfig(work_dir=Path(".vm")))
    result.exit_code, result.failures, result.output   # failures from the JUnit XML

Inside, pytest runs from the same checkout with the same venv, with
``PYTHONDONTWRITEBYTECODE=1`` (the host root is read-only), no cache
provider, the fault ledger on the guest's tmpfs, and JUnit XML written to the
writable share.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from chaos_ext._products.sandbox.vm.initramfs import SHARE_IN_GUEST
from chaos_ext._products.sandbox.vm.machine import CommandResult, VirtualMachine, VMConfig

__all__ = ["GUEST_ENV", "LaneResult", "run_in_vm", "run_pytest"]

GUEST_ENV = {
    "PYTHONDONTWRITEBYTECODE": "1",
    "GAMEDAY_LEDGER": "/tmp/gameday-ledger.sqlite3",  # noqa: S108 - the guest's own tmpfs
    "GAMEDAY_IN_VM": "1",
    "TMPDIR": "/tmp",  # noqa: S108 - the guest's own tmpfs
}


@dataclass(frozen=True)
class LaneResult:
    """What a pytest run inside the VM produced."""

    exit_code: int | None
    output: str
    failures: list[str]
    junit: Path | None
    boot_accel: str


def _failures(junit: Path) -> list[str]:
    if not junit.exists():
        return []
    root = ET.parse(junit).getroot()  # noqa: S314 - our own file
    found = []
    for case in root.iter("testcase"):
        for bad in list(case.findall("failure")) + list(case.findall("error")):
            name = f"{case.get('classname')}::{case.get('name')}"
            found.append(f"{name}: {(bad.get('message') or '')[:400]}\n{(bad.text or '')[-1500:]}")
    return found


def run_in_vm(
    argv: list[str],
    *,
    config: VMConfig,
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> tuple[CommandResult, VirtualMachine]:
    """Boot, run one command (env: :data:`GUEST_ENV` and ``env``), power off; the share stays."""
    with VirtualMachine(config) as vm:
        guest_env = {**GUEST_ENV, **(env or {})}
        result = vm.run(argv, timeout=timeout, env=guest_env, cwd=str(config.cwd))
    return result, vm


def run_pytest(
    args: list[str],
    *,
    config: VMConfig,
    timeout: float = 420.0,
    env: Mapping[str, str] | None = None,
) -> LaneResult:
    """Run ``pytest ARGS`` in the VM (``env`` added to :data:`GUEST_ENV`); JUnit XML comes back
    through the share."""
    junit_guest = f"{SHARE_IN_GUEST}/junit.xml"
    argv = [
        config.python,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        f"--junitxml={junit_guest}",
        *args,
    ]
    result, vm = run_in_vm(argv, config=config, timeout=timeout, env=env)
    junit = vm.share / "junit.xml"
    output = result.stdout + result.stderr
    if result.timed_out:
        output += f"\n[timed out after {timeout} s in the VM]"
    return LaneResult(
        result.exit_code, output, _failures(junit), junit if junit.exists() else None, vm.accel
    )
