"""Throwaway real targets, one each per module: the crash matrix's (``tests/crash/conftest.py``
imports these fixtures) and the behavioural conventions test's.

Each comes with a ``state()`` reader in :mod:`support.crashkit`: what is injected right
now, read through the target's own interface (``ss`` for TCP connections,
``pg_stat_activity``, dnsmasq's query log, the HTTP server's request counter, the
emulator's API), never through the fault ledger.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chaos_ext._products.sandbox.servers import dnsmasq, postgres
from chaos_ext._products.sandbox.servers.dnsmasq import Dnsmasq
from support import istio_fixtures as istio
from support import k8s_objects as o
from support.crashkit import PASSWORD
from support.dns_checks import RECORDS, ZONES
from support.dns_netlab import ResolverPair, resolver_pair
from support.k8s_emulator import EmulatorHandle, start
from support.servers import http_target
from support.servers.http_target import HttpTarget


@pytest.fixture(scope="module")
def dns_server() -> Iterator[Dnsmasq]:
    with dnsmasq.start(records=RECORDS, local_domains=ZONES, log_queries=True) as server:
        yield server


@pytest.fixture(scope="module")
def resolvers() -> Iterator[ResolverPair]:
    """A client namespace and a resolver namespace (the DNS rate limit's target)."""
    with resolver_pair() as made:
        yield made


@pytest.fixture(scope="module")
def pg_server() -> Iterator[postgres.PostgresServer]:
    with postgres.start(password=PASSWORD, max_connections=40) as server:
        yield server


@pytest.fixture(scope="module")
def web() -> Iterator[HttpTarget]:
    with http_target.start() as server:
        yield server


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorHandle]:
    handle = start(tmp_path_factory.mktemp("cluster") / "kubeconfig")
    try:
        handle.put(istio.injector_configmap(istio.injector_values(tag="1.22.3")))
        handle.put([o.node(f"worker-{i}", {"role": "eat-workers"}) for i in range(6)])
        explicit = o.node("worker-0", {"role": "eat-workers"})
        explicit["spec"]["unschedulable"] = False  # must come back exactly
        handle.put(explicit)
        yield handle
    finally:
        handle.stop()
