"""The DNS rate limit on Debian's kernel (nf_tables and nft_limit as modules), in the VM lane.

The host kernel has nf_tables built in; clusters run distribution kernels where
it is a module. Inside the qemu micro-VM (Debian 6.1, modules loaded by the
initramfs) the preflight must pass and the limit must hold between two
namespaces. Collected by tests/network/test_network_vm_lane.py; skipped elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.dns_netlab import flood_from, netns_tables, resolver_pair

from chaos_ext.dns.actions import limit_dns_rate, remove_dns_rate_limit
from chaos_ext.dns.probes import dns_rate_limit_drops, dns_rate_limit_supported

pytestmark = [
    pytest.mark.vm,
    pytest.mark.skipif(os.environ.get("GAMEDAY_IN_VM") != "1", reason="VM lane only"),
]


def test_preflight_and_limit_on_a_distribution_kernel(ledger_path: Path) -> None:
    with resolver_pair() as pair:
        found = dns_rate_limit_supported(target=pair.target)
        assert found["kernel"] == os.uname().release
        applied = limit_dns_rate(pps=20, target=pair.target)
        try:
            assert netns_tables(pair.client_ns) == [applied["table"]]
            limited = flood_from(pair, qps=200, duration=5)
            # the bucket starts full: 20 + 5 s x 20/s at most (emulation only slows sending)
            assert limited["answer"] <= 20 + 5 * 20 + 2, limited
            drops = dns_rate_limit_drops(target=pair.target)
            assert drops["dropped"] == limited["error"] > 0
        finally:
            remove_dns_rate_limit(target=pair.target)
        assert netns_tables(pair.client_ns) == []
