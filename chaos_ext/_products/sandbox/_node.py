"""The node of the vm backend: only the app->database path crosses a kernel with netem.

This host's kernel has no netem, but network namespaces work. So every service
runs natively in the sandbox's namespaces, and a micro-VM running Debian's
kernel (:mod:`chaos_ext._products.sandbox.vm`) sits on one path only, like the node an app's
packets leave through::

    app (10.77.0.10) --tap node0--> VM eth0 [ip_forward; netem here] VM eth1 (10.77.0.50)
        ^                                                                   | on the bridge
        +------------------------------- bridge <--- db (10.77.0.20) <-----+

* the app routes the database's /32 through the VM (``onlink`` via the node's
  bridge address, on the tap ``node0``, source its own address);
* the database routes the app's /32 back through the node's bridge address;
* the VM forwards, and the DB latency fault delays its eth1 towards the database,
  injected over SSH (``ssh:<node address>``) like on a real node.

DNS, Prometheus, the exporter, the traffic and the runner never touch the VM.
Emulation (TCG) then costs each app->database round trip about 0.5 ms instead
of making every process ten times slower.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from chaos_ext._core.targets.netns import run_in_netns
from chaos_ext._products.sandbox._netns import ns_path
from chaos_ext._products.sandbox._topology import Topology
from chaos_ext._products.sandbox.errors import SandboxError

__all__ = [
    "GUEST_SYSCTLS",
    "SSHD",
    "NodeSsh",
    "guest_network_batch",
    "open_taps",
    "prepare_sshd",
    "route_through_node",
]

SSHD = "/usr/sbin/sshd"

TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI, IFF_VNET_HDR = 0x0002, 0x1000, 0x4000
RTNH_F_ONLINK = 4

GUEST_SYSCTLS = (
    "net.ipv4.ip_forward=1",
    # the node answers ARP for its bridge address on the app link too (weak host model,
    # the kernel default): the app's route uses it as an on-link gateway
    "net.ipv4.conf.all.rp_filter=0",
    "net.ipv4.conf.default.rp_filter=0",
    "net.ipv4.conf.all.send_redirects=0",
)
"""Kernel settings of the node VM: a router without reverse-path filtering or redirects."""


def guest_network_batch(topo: Topology) -> str:
    """``ip -batch`` input for the guest: eth0 to the app (no address), eth1 on the bridge."""
    app = topo.host("app").address
    return "\n".join(
        [
            "link set lo up",
            "link set eth0 up",
            "link set eth1 up",
            f"addr add {topo.node_address}/{topo.prefixlen} dev eth1",
            f"route add {app}/32 dev eth0",
            "",
        ]
    )


def _open_tap(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
    try:
        flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), flags))
    except OSError:
        os.close(fd)
        raise
    return fd


def _link_up(name: str, master: str | None = None) -> None:
    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=name)[0]
        if master is not None:
            ipr.link("set", index=index, master=ipr.link_lookup(ifname=master)[0])
        ipr.link("set", index=index, state="up")


def open_taps(topo: Topology) -> tuple[int, int]:
    """(app side, bridge side): taps made in the app's and the core namespaces, up.

    They exist while the returned descriptors are open (qemu holds them), so they
    vanish with the VM.
    """
    app_ns, core_ns = ns_path(topo.host("app").netns), ns_path(topo.core_netns)
    try:
        app_fd = run_in_netns(app_ns, lambda: _open_tap(topo.node_link), timeout=30)
        core_fd = run_in_netns(core_ns, lambda: _open_tap(topo.node_bridge_port), timeout=30)
        run_in_netns(app_ns, lambda: _link_up(topo.node_link), timeout=30)
        run_in_netns(core_ns, lambda: _link_up(topo.node_bridge_port, topo.bridge), timeout=30)
    except (NetlinkError, OSError) as exc:
        raise SandboxError(f"cannot make the node VM's taps: {exc}") from exc
    return app_fd, core_fd


def route_through_node(topo: Topology) -> None:
    """Send app<->database traffic through the node VM (both directions, /32 routes)."""
    app, db = topo.host("app"), topo.host("db")

    def app_side() -> None:
        with IPRoute() as ipr:
            link = ipr.link_lookup(ifname=topo.node_link)[0]
            ipr.route(
                "add",
                dst=f"{db.address}/32",
                gateway=topo.node_address,
                oif=link,
                flags=RTNH_F_ONLINK,
                prefsrc=app.address,
            )

    def db_side() -> None:
        with IPRoute() as ipr:
            ipr.route("add", dst=f"{app.address}/32", gateway=topo.node_address)

    try:
        run_in_netns(ns_path(app.netns), app_side, timeout=30)
        run_in_netns(ns_path(db.netns), db_side, timeout=30)
    except (NetlinkError, OSError) as exc:
        raise SandboxError(
            f"cannot route the app's database traffic through the node: {exc}"
        ) from exc


@dataclass(frozen=True)
class NodeSsh:
    """The node's sshd as prepared: its config (as the guest sees it) and the client side."""

    config_in_guest: str
    pid_file: Path
    known_hosts: Path
    client_key: Path


def _keygen(path: Path) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        timeout=60,
        capture_output=True,
    )
    return path.with_suffix(".pub").read_text().strip()


def prepare_sshd(workdir: Path, in_guest: str, address: str, port: int) -> NodeSsh:
    """Fresh host and client keys, ``sshd_config`` and ``known_hosts`` in ``workdir``
    (the guest sees it as ``in_guest``): key login as root, on ``address`` only."""
    workdir.mkdir(parents=True, exist_ok=True)
    host_public = _keygen(workdir / "ssh_host_ed25519_key")
    (workdir / "authorized_keys").write_text(_keygen(workdir / "client_ed25519") + "\n")
    (workdir / "sshd_config").write_text(
        "\n".join(
            [
                f"Port {port}",
                f"ListenAddress {address}",
                f"HostKey {in_guest}/ssh_host_ed25519_key",
                f"PidFile {in_guest}/sshd.pid",
                f"AuthorizedKeysFile {in_guest}/authorized_keys",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                "LogLevel ERROR",
                # sessions read no dotfiles: under emulation a shell's start-up costs seconds
                f"SetEnv HOME={in_guest}",
                "",
            ]
        )
    )
    where = address if port == 22 else f"[{address}]:{port}"
    known_hosts = workdir / "known_hosts"
    known_hosts.write_text(f"{where} {' '.join(host_public.split()[:2])}\n")
    return NodeSsh(
        f"{in_guest}/sshd_config", workdir / "sshd.pid", known_hosts, workdir / "client_ed25519"
    )
