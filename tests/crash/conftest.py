"""The targets of the crash matrix: real servers and a Kubernetes API emulator, one each per
module (defined in :mod:`support.crash_targets`, shared with the behavioural conventions test).

Each offers ``state()``: what is injected right now, read through the target's
own interface (``ss`` for TCP connections, ``pg_stat_activity``, dnsmasq's
query log, the HTTP server's request counter, the emulator's API), never
through the fault ledger.
"""

from support.crash_targets import cluster, dns_server, pg_server, resolvers, web

__all__ = ["cluster", "dns_server", "pg_server", "resolvers", "web"]  # the fixtures
