"""Fixtures for network tests: namespaces and veth pairs the test itself creates."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=check)


def tc_show(ns: str, dev: str) -> str:
    """The CLI's view of a tree (an independent check of the netlink code)."""
    return "".join(
        sh("tc", "-n", ns, what, "show", "dev", dev).stdout for what in ("qdisc", "class", "filter")
    )


@dataclass(frozen=True)
class VethNs:
    ns: str
    dev: str
    peer: str


@pytest.fixture
def veth_ns() -> Iterator[VethNs]:
    """A fresh namespace with a veth pair (``dev`` and ``peer``) inside it."""
    ns = f"gdn-{uuid.uuid4().hex[:8]}"
    sh("ip", "netns", "add", ns)
    try:
        sh("ip", "-n", ns, "link", "add", "va", "type", "veth", "peer", "name", "vb")
        yield VethNs(ns, "va", "vb")
    finally:
        sh("ip", "netns", "delete", ns, check=False)


def kernel_has_netem() -> bool:
    """Whether this kernel can build the latency tree (probed in a scratch namespace)."""
    from chaos_ext.network._local import missing_features  # noqa: PLC0415

    return not missing_features()


def gameday_process(ledger: Path, cwd: Path, *args: str) -> subprocess.Popen[bytes]:
    """Start the real ``gameday`` CLI in the background against ``ledger``."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "GAMEDAY_LEDGER": str(ledger), "PYTHONPATH": str(root)}
    return subprocess.Popen(
        [sys.executable, "-m", "chaos_ext.cli.main", *args], env=env, cwd=cwd,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
