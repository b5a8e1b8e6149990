"""Build and remove the sandbox's namespaces and links with pyroute2 (netlink).

Only namespaces this module creates are touched: a ``<prefix>-core`` namespace
holding a bridge, and one namespace per host joined to it by a veth pair
(``eth0`` inside the host). Nothing is created in the caller's namespace.
"""

from __future__ import annotations

from pyroute2 import NetNS, netns
from pyroute2.netlink.exceptions import NetlinkError

from chaos_ext.errors import SandboxError
from chaos_ext.sandbox._topology import Host, Topology

__all__ = ["build", "existing", "teardown"]


def existing(topo: Topology) -> list[str]:
    """The sandbox's namespaces that exist now."""
    present = set(netns.listnetns())
    return [name for name in topo.namespaces if name in present]


def _up(ns: NetNS, ifname: str) -> int:
    index: int = ns.link_lookup(ifname=ifname)[0]
    ns.link("set", index=index, state="up")
    return index


def _join(topo: Topology, host: Host) -> None:
    with NetNS(topo.core_netns) as core:
        core.link(
            "add", ifname=host.bridge_port, kind="veth",
            peer={"ifname": "eth0", "net_ns_fd": host.netns},
        )  # fmt: skip
        port = core.link_lookup(ifname=host.bridge_port)[0]
        bridge = core.link_lookup(ifname=topo.bridge)[0]
        core.link("set", index=port, master=bridge)
        core.link("set", index=port, state="up")
    with NetNS(host.netns) as ns:
        _up(ns, "lo")
        index = _up(ns, "eth0")
        ns.addr("add", index=index, address=host.address, prefixlen=topo.prefixlen)


def build(topo: Topology) -> None:
    """Create every namespace and link; on any failure remove what was made."""
    if existing(topo):
        raise SandboxError(
            f"sandbox {topo.prefix!r} already has namespaces {existing(topo)}: "
            f"run `gameday sandbox down --prefix {topo.prefix}` first"
        )
    try:
        for name in topo.namespaces:
            netns.create(name)
        with NetNS(topo.core_netns) as core:
            core.link("add", ifname=topo.bridge, kind="bridge")
            _up(core, topo.bridge)
            _up(core, "lo")
        for host in topo.hosts:
            _join(topo, host)
    except (NetlinkError, OSError) as exc:
        teardown(topo)
        raise SandboxError(f"cannot build the sandbox network: {exc}") from exc


def teardown(topo: Topology) -> list[str]:
    """Remove the sandbox's namespaces (their veths go with them). Idempotent."""
    removed = []
    for name in existing(topo):
        try:
            netns.remove(name)
        except OSError as exc:
            raise SandboxError(f"cannot remove namespace {name}: {exc}") from exc
        removed.append(name)
    return removed
