"""Fixtures for network tests: namespaces and veth pairs the test itself creates."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from support.netlab import VethNs, sh


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
