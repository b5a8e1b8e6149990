"""Fixtures for network tests: namespaces and veth pairs the test itself creates."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.netlab import VethNs, veth_in_new_netns


@pytest.fixture
def veth_ns() -> Iterator[VethNs]:
    """A fresh namespace with a veth pair (``dev`` and ``peer``) inside it."""
    with veth_in_new_netns("gdn") as made:
        yield made
