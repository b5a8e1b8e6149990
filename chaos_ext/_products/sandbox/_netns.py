"""Build and remove the sandbox's namespaces and links.

Only namespaces this module creates are touched: a ``<prefix>-core`` namespace
holding a bridge, and one namespace per host joined to it by a veth pair
(``eth0`` inside the host). Nothing is created in the caller's namespace.
Named namespaces are made and removed with ``ip netns`` (argument lists);
links and addresses with pyroute2 netlink, from a thread that entered the
namespace (pyroute2's own namespace support forks the process).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from chaos_ext._core.targets.netns import run_in_netns
from chaos_ext._products.sandbox._topology import Host, Topology
from chaos_ext._products.sandbox.errors import SandboxError

__all__ = ["build", "existing", "ns_path", "teardown"]

NETNS_DIR = Path("/var/run/netns")


def ns_path(name: str) -> str:
    return str(NETNS_DIR / name)


def existing(topo: Topology) -> list[str]:
    """The sandbox's namespaces that exist now."""
    present = set(os.listdir(NETNS_DIR)) if NETNS_DIR.is_dir() else set()
    return [name for name in topo.namespaces if name in present]


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise SandboxError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _up(ipr: IPRoute, ifname: str) -> int:
    index: int = ipr.link_lookup(ifname=ifname)[0]
    ipr.link("set", index=index, state="up")
    return index


def _make_bridge(topo: Topology) -> None:
    with IPRoute() as ipr:
        ipr.link("add", ifname=topo.bridge, kind="bridge")
        _up(ipr, topo.bridge)
        _up(ipr, "lo")


def _plug(topo: Topology, host: Host) -> None:
    peer_ns = os.open(ns_path(host.netns), os.O_RDONLY)
    try:
        with IPRoute() as ipr:
            ipr.link(
                "add",
                ifname=host.bridge_port,
                kind="veth",
                peer={"ifname": "eth0", "net_ns_fd": peer_ns},
            )
            port = ipr.link_lookup(ifname=host.bridge_port)[0]
            bridge = ipr.link_lookup(ifname=topo.bridge)[0]
            ipr.link("set", index=port, master=bridge)
            ipr.link("set", index=port, state="up")
    finally:
        os.close(peer_ns)


def _address(topo: Topology, host: Host) -> None:
    with IPRoute() as ipr:
        _up(ipr, "lo")
        index = _up(ipr, "eth0")
        ipr.addr("add", index=index, address=host.address, prefixlen=topo.prefixlen)


def build(topo: Topology) -> None:
    """Create every namespace and link; on any failure remove what was made."""
    if existing(topo):
        raise SandboxError(
            f"sandbox {topo.prefix!r} already has namespaces {existing(topo)}: "
            f"run `gameday sandbox down --prefix {topo.prefix}` first"
        )
    try:
        for name in topo.namespaces:
            _ip("netns", "add", name)
        run_in_netns(ns_path(topo.core_netns), lambda: _make_bridge(topo))
        for host in topo.hosts:
            run_in_netns(ns_path(topo.core_netns), lambda h=host: _plug(topo, h))  # type: ignore[misc]
            run_in_netns(ns_path(host.netns), lambda h=host: _address(topo, h))  # type: ignore[misc]
    except (NetlinkError, OSError, SandboxError) as exc:
        teardown(topo)
        raise SandboxError(f"cannot build the sandbox network: {exc}") from exc


def teardown(topo: Topology) -> list[str]:
    """Remove the sandbox's namespaces (their veths go with them). Idempotent."""
    removed = []
    for name in existing(topo):
        _ip("netns", "delete", name)
        removed.append(name)
    return removed
