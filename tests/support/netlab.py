"""Helpers for network tests: run commands, show tc trees, probe the kernel, run gameday.

Import with ``from support.netlab import ...`` (fixtures live in tests/network/conftest.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["VethNs", "gameday_process", "kernel_has_netem", "sh", "tc_show"]

ROOT = Path(__file__).resolve().parents[2]


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=check)


# a counter, not configuration: htb counts packets that passed before its classes existed
# (an ARP or IPv6 packet while a tree is being built; seen once under emulation on a busy host)
_COUNTERS = re.compile(r" direct_packets_stat \d+")


def tc_show(ns: str, dev: str) -> str:
    """The CLI's view of a tree (an independent check of the netlink code), without counters."""
    return _COUNTERS.sub(
        "",
        "".join(
            sh("tc", "-n", ns, what, "show", "dev", dev).stdout
            for what in ("qdisc", "class", "filter")
        ),
    )


@dataclass(frozen=True)
class VethNs:
    ns: str
    dev: str
    peer: str


@contextmanager
def veth_in_new_netns(prefix: str) -> Iterator[VethNs]:
    """A new namespace ``<prefix>-<8 hex>`` holding a veth pair ``va``/``vb``; deleted after."""
    ns = f"{prefix}-{uuid.uuid4().hex[:8]}"
    sh("ip", "netns", "add", ns)
    try:
        sh("ip", "-n", ns, "link", "add", "va", "type", "veth", "peer", "name", "vb")
        yield VethNs(ns, "va", "vb")
    finally:
        sh("ip", "netns", "delete", ns, check=False)


def kernel_has_netem() -> bool:
    """Whether this kernel runs netem, asked of ``tc`` itself in a scratch namespace.

    Independent of the product (issue 34): not ``missing_features()``, the code
    under test, but Debian's ``tc qdisc add ... netem`` on the scratch
    namespace's loopback. The namespace is deleted whatever happens.
    """
    ns = f"gd-netem-probe-{os.getpid()}"
    sh("ip", "netns", "add", ns)
    try:
        added = sh(
            "ip",
            "netns",
            "exec",
            ns,
            "tc",
            "qdisc",
            "add",
            "dev",
            "lo",
            "root",
            "netem",
            "delay",
            "1ms",
            check=False,
        )
        return added.returncode == 0
    finally:
        sh("ip", "netns", "delete", ns)


def gameday_process(ledger: Path, cwd: Path, *args: str) -> subprocess.Popen[bytes]:
    """Start the real ``gameday`` CLI in the background; its output goes to cwd/gameday.log."""
    env = {**os.environ, "GAMEDAY_LEDGER": str(ledger), "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    with (cwd / "gameday.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "chaos_ext.cli.main", *args],
            env=env,
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
