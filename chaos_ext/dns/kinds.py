"""The DNS fault kinds, declared once (see :mod:`chaos_ext._core.ledger.kinds`)."""

from __future__ import annotations

from chaos_ext._core.helper_kind import HELPERS
from chaos_ext._core.ledger import FAULT_KINDS, LOCAL, FaultKind, Scan
from chaos_ext.dns._dnserr_actions import KIND as ERRORS_KIND
from chaos_ext.dns._dnserr_actions import undo_dns_errors
from chaos_ext.dns._helper_undo import release_hold, stop_flood
from chaos_ext.dns._ratelimit_actions import RATE_KIND, undo_rate_limit
from chaos_ext.dns.actions import FLOOD_KIND, HOLD_KIND
from chaos_ext.dns.leftovers import find_tables
from chaos_ext.dns.plan import (
    plan_flood_dns,
    plan_inject_dns_errors,
    plan_limit_dns_rate,
    plan_saturate_dnsmasq_tcp,
)

__all__ = ["ERRORS", "FLOOD", "HOLD", "RATE_LIMIT"]

_MODULE = "chaos_ext.dns.actions"
HOLD = FaultKind(
    name=HOLD_KIND,
    summary="hold idle TCP connections to a resolver so dnsmasq's 20 TCP children run out",
    module=_MODULE,
    actions={"saturate_dnsmasq_tcp": plan_saturate_dnsmasq_tcp},
    rollback="release_dnsmasq_tcp",
    undo=release_hold,
    scan=HELPERS,
    ends_by_itself="at hold_seconds (the helper's own cap, the timer and the watchdog)",
    failpoints=("helper.started", "helper.stopping"),
    docs="docs/dns.md",
)
FLOOD = FaultKind(
    name=FLOOD_KIND,
    summary="send DNS queries to a resolver at a capped rate for a capped time",
    module=_MODULE,
    actions={"flood_dns": plan_flood_dns},
    rollback="stop_dns_flood",
    undo=stop_flood,
    scan=HELPERS,
    ends_by_itself="at duration_seconds or max_queries (the flood's own bounds)",
    failpoints=("dns-flood.mid-apply", "undo.before-close"),
    docs="docs/dns.md",
)
RATE_LIMIT = FaultKind(
    name=RATE_KIND,
    summary="cap the DNS packets per second a target sends (the VPC resolver's 1,024 pps)",
    module=_MODULE,
    actions={"limit_dns_rate": plan_limit_dns_rate},
    rollback="remove_dns_rate_limit",
    undo=undo_rate_limit,
    scan=Scan(
        "nft tables",
        "nft tables inet gameday_dnsrate_<id> in every network namespace",
        LOCAL,
        find_tables,
    ),
    ends_by_itself="at duration_seconds when > 0 (timer, and the watchdog if the runner dies)",
    failpoints=("dns-rate-limit.mid-apply", "dns-rate-limit.mid-undo"),
    docs="docs/dns.md",
)
ERRORS = FaultKind(
    name=ERRORS_KIND,
    summary="answer matching names with NXDOMAIN, SERVFAIL, REFUSED, no answer or a random IP",
    module=_MODULE,
    actions={"inject_dns_errors": plan_inject_dns_errors},
    rollback="remove_dns_errors",
    undo=undo_dns_errors,
    scan=Scan(
        "nft tables",
        "nft tables inet gameday_dnserr_<entry id> in every network namespace of this machine"
        " (its proxy is named by the table; on a node, the proxy ends at its own cap)",
        LOCAL,
        find_tables,
    ),
    ends_by_itself="at duration_seconds (timer, the proxy's own cap, and the watchdog)",
    failpoints=("dns-errors.mid-apply", "dns-errors.mid-undo"),
    docs="docs/dns.md",
)
FAULT_KINDS.declare(HOLD, FLOOD, RATE_LIMIT, ERRORS)
