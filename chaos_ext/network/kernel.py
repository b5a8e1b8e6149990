"""What this host's kernel offers the latency fault (a live, harmless probe).

Public for other packages (the sandbox picks its backend with it); the
``latency_supported`` probe and ``add_latency``'s preflight use it too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from chaos_ext._core.targets import netns as _netns
from chaos_ext.network import _spec

__all__ = ["missing_features"]


def missing_features() -> list[str]:
    """Kernel features the fault needs that this kernel lacks (live probe).

    Builds the same kind of tree (htb root, netem leaf, u32 filter) on the
    loopback of a fresh anonymous namespace that vanishes afterwards.
    """

    def probe() -> list[str]:
        missing: list[str] = []
        with IPRoute() as ipr:
            steps: list[tuple[str, Callable[[], Any]]] = [
                ("sch_htb", lambda: ipr.tc("add", "htb", 1, 0x10000, default=1)),
                (
                    "sch_htb",
                    lambda: ipr.tc("add-class", "htb", 1, 0x10001, parent=0x10000, rate="1gbit"),
                ),
                (
                    "sch_netem",
                    lambda: ipr.tc("add", "netem", 1, 0x20000, parent=0x10001, delay=1000),
                ),
                (
                    "cls_u32",
                    lambda: ipr.tc(
                        "add-filter",
                        "u32",
                        1,
                        parent=0x10000,
                        prio=1,
                        protocol=_spec.ETH_P_IP,
                        target=0x10001,
                        keys=["0x0/0x0+16"],
                    ),
                ),
            ]
            for feature, step in steps:
                try:
                    step()
                except NetlinkError:
                    missing.append(feature)
                    if feature == "sch_htb":
                        return ["cls_u32", "sch_htb", "sch_netem"]
        return sorted(set(missing))

    return _netns.run_in_netns(None, probe)
