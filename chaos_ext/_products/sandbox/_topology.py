"""The sandbox topology as data: names and addresses, computed purely from a prefix.

Hosts are network namespaces on one bridge. The vm backend adds a *node*: a micro-VM
whose kernel has netem, on the bridge at ``node_address`` and linked straight to the app
host by ``node_link`` (a tap). Only the app's traffic to the database is routed through
it (see :mod:`chaos_ext._products.sandbox._node`); everything else stays native on this host."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from chaos_ext.errors import InvalidArgument

__all__ = ["HOSTS", "Host", "Topology", "topology"]

HOSTS = ("app", "db", "dns", "mon")
_PREFIX = re.compile(r"^[a-z][a-z0-9]{0,5}$")


@dataclass(frozen=True)
class Host:
    """One sandbox host: its namespace, its address and the bridge-side veth."""

    role: str
    netns: str
    address: str
    bridge_port: str


@dataclass(frozen=True)
class Topology:
    """Every name and address of one sandbox."""

    prefix: str
    subnet: str
    core_netns: str
    bridge: str
    hosts: tuple[Host, ...]
    node_address: str
    """The node VM's address on the bridge (its eth1; eth0 is the link to the app)."""
    node_link: str = "node0"
    """The tap in the app's namespace whose other end is the node VM's eth0."""

    @property
    def node_bridge_port(self) -> str:
        """The tap in the core namespace, on the bridge, whose other end is the VM's eth1."""
        return f"{self.prefix}b-node"

    def host(self, role: str) -> Host:
        for host in self.hosts:
            if host.role == role:
                return host
        raise KeyError(role)

    @property
    def prefixlen(self) -> int:
        return ipaddress.ip_network(self.subnet).prefixlen

    @property
    def namespaces(self) -> list[str]:
        return [self.core_netns, *(h.netns for h in self.hosts)]


def topology(prefix: str = "gd", subnet: str = "10.77.0.0/24") -> Topology:
    """The topology for ``prefix`` (1-6 lowercase letters/digits) on ``subnet``."""
    if not _PREFIX.match(prefix):
        raise InvalidArgument(
            f"prefix: {prefix!r} must be 1-6 lowercase letters or digits, starting with a letter"
        )
    try:
        net = ipaddress.ip_network(subnet)
    except ValueError:
        raise InvalidArgument(f"subnet: {subnet!r} is not a network") from None
    if net.version != 4 or not net.is_private or net.num_addresses < 64:
        raise InvalidArgument(f"subnet: {subnet!r} must be a private IPv4 network of /26 or larger")
    hosts = tuple(
        Host(
            role=role,
            netns=f"{prefix}-{role}",
            address=str(net.network_address + 10 * (i + 1)),
            bridge_port=f"{prefix}b-{role}",
        )
        for i, role in enumerate(HOSTS)
    )
    node = str(net.network_address + 10 * (len(HOSTS) + 1))
    return Topology(prefix, str(net), f"{prefix}-core", "br0", hosts, node)
