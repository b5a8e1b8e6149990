"""Pure core of the latency fault: argument checks, targets, the scoped qdisc tree.

The tree that :func:`chaos_ext.network.actions.add_latency` installs on an
interface (handles are fixed, so the fault is recognisable)::

    root  htb 1d1a:  default 1d1a:1           (replaces the previous root; snapshot kept)
      class 1d1a:1  htb (no shaping)          <- everything else: not delayed
      class 1d1a:2  htb (no shaping)
        qdisc 1d1b: netem delay/jitter/loss   <- matching destinations only
      filters u32 on 1d1a:  dst CIDR [+ dst port] -> 1d1a:2   (one per CIDR x port)
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chaos_ext._core.targets.spec import Target, parse_target
from chaos_ext._core.validation import require_cidrs, require_name, require_range
from chaos_ext.errors import InvalidArgument

__all__ = [
    "DEFAULT_CLASS",
    "DELAY_CLASS",
    "NETEM_HANDLE",
    "ROOT_HANDLE",
    "LatencySpec",
    "check_latency_arguments",
    "check_remove_arguments",
    "check_target_arguments",
    "handle_text",
    "netem_kwargs",
    "tc_apply_argvs",
    "u32_keys",
]

ROOT_HANDLE = 0x1D1A0000
DEFAULT_CLASS = ROOT_HANDLE | 1
DELAY_CLASS = ROOT_HANDLE | 2
NETEM_HANDLE = 0x1D1B0000
NO_SHAPING_RATE = "10gbit"
HTB_QUANTUM = 200000
MAX_FILTERS = 64
ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD


@dataclass(frozen=True)
class LatencySpec:
    """What to delay and by how much (validated)."""

    delay_seconds: float
    jitter_seconds: float
    correlation: float
    loss: float
    destinations: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
    ports: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "delay_seconds": self.delay_seconds,
            "jitter_seconds": self.jitter_seconds,
            "correlation": self.correlation,
            "loss": self.loss,
            "destinations": [str(n) for n in self.destinations],
            "ports": list(self.ports),
        }


def check_target_arguments(arguments: Mapping[str, Any]) -> tuple[Target, str]:
    """Validate ``target`` and ``interface`` (a Linux interface name: at most 15 chars)."""
    target = parse_target(arguments.get("target", "local") or "local")
    interface = require_name("interface", arguments.get("interface", ""), max_len=15)
    return target, interface


def check_remove_arguments(arguments: Mapping[str, Any]) -> None:
    """remove_latency's filters: both optional, each valid when given."""
    if arguments.get("target"):
        parse_target(arguments["target"])
    if arguments.get("interface"):
        require_name("interface", arguments["interface"], max_len=15)


def check_latency_arguments(arguments: Mapping[str, Any]) -> LatencySpec:
    """Validate every add_latency argument before anything is touched."""
    check_target_arguments(arguments)
    delay = require_range("delay_seconds", arguments.get("delay_seconds", 0), 0.001, 60)
    jitter = require_range("jitter_seconds", arguments.get("jitter_seconds", 0), 0, delay)
    correlation = require_range("correlation", arguments.get("correlation", 0), 0, 100)
    if correlation and not jitter:
        raise InvalidArgument("correlation: needs jitter_seconds > 0 (it correlates the jitter)")
    loss = require_range("loss", arguments.get("loss", 0), 0, 100)
    require_range("duration_seconds", arguments.get("duration_seconds", 0), 0, 86_400)
    nets = require_cidrs("destinations", arguments.get("destinations") or [])
    ports = arguments.get("ports") or []
    if not isinstance(ports, list):
        raise InvalidArgument(f"ports: expected a list of port numbers, got {ports!r}")
    for port in ports:
        require_range("ports", port, 1, 65535)
    if len(nets) * max(1, len(ports)) > MAX_FILTERS:
        raise InvalidArgument(
            f"destinations x ports: {len(nets)} x {len(ports)} filters exceed {MAX_FILTERS}; "
            "use wider CIDRs"
        )
    return LatencySpec(
        float(delay),
        float(jitter),
        float(correlation),
        float(loss),
        tuple(nets),
        tuple(int(p) for p in ports),
    )


def u32_keys(
    net: ipaddress.IPv4Network | ipaddress.IPv6Network, port: int | None
) -> tuple[int, list[str]]:
    """(ethernet protocol, pyroute2 u32 keys ``value/mask+offset``) for dst CIDR [+ dst port].

    Offsets assume no IPv4 options / IPv6 extension headers before TCP/UDP, as
    ``tc ... u32 match ip dport`` does.
    """
    keys: list[str] = []
    if net.version == 4:
        protocol, dst_offset, port_offset = ETH_P_IP, 16, 20
    else:
        protocol, dst_offset, port_offset = ETH_P_IPV6, 24, 40
    value, mask = int(net.network_address), int(net.netmask)
    words = net.max_prefixlen // 32
    for i in range(words):
        shift = 32 * (words - 1 - i)
        word_mask = (mask >> shift) & 0xFFFFFFFF
        if word_mask:
            word = (value >> shift) & 0xFFFFFFFF
            keys.append(f"0x{word:08x}/0x{word_mask:08x}+{dst_offset + 4 * i}")
    if port is not None:
        keys.append(f"0x{port:08x}/0x0000ffff+{port_offset}")
    if not keys:  # 0.0.0.0/0 without port: match every packet of this protocol
        keys.append(f"0x00000000/0x00000000+{dst_offset}")
    return protocol, keys


def filter_specs(spec: LatencySpec) -> list[tuple[int, list[str]]]:
    """One (protocol, keys) per destination x port."""
    ports: list[int | None] = list(spec.ports) or [None]
    return [u32_keys(net, port) for net in spec.destinations for port in ports]


def netem_kwargs(spec: LatencySpec) -> dict[str, Any]:
    """pyroute2 ``tc("add", "netem", ...)`` keywords (times in microseconds)."""
    kwargs: dict[str, Any] = {"delay": round(spec.delay_seconds * 1e6), "limit": 10000}
    if spec.jitter_seconds:
        kwargs["jitter"] = round(spec.jitter_seconds * 1e6)
    if spec.correlation:
        kwargs["delay_corr"] = spec.correlation
    if spec.loss:
        kwargs["loss"] = spec.loss
    return kwargs


def _tc_time(seconds: float) -> str:
    """``0.15`` -> ``150ms``, ``0.0005`` -> ``500us`` (tc's time units)."""
    micros = round(seconds * 1e6)
    return f"{micros // 1000}ms" if micros % 1000 == 0 else f"{micros}us"


def handle_text(handle: int) -> str:
    """``0x1d1a0002`` -> ``1d1a:2`` (tc notation)."""
    return f"{handle >> 16:x}:{handle & 0xFFFF:x}"


def tc_apply_argvs(spec: LatencySpec, interface: str) -> list[list[str]]:
    """The same tree as ``tc`` command argument lists (remote nodes, the benchmark)."""
    dev = ["dev", interface]
    root, default, delayed = (handle_text(h) for h in (ROOT_HANDLE, DEFAULT_CLASS, DELAY_CLASS))
    netem = ["delay", _tc_time(spec.delay_seconds)]
    if spec.jitter_seconds:
        netem += [_tc_time(spec.jitter_seconds)]
        if spec.correlation:
            netem += [f"{spec.correlation:g}%"]
    if spec.loss:
        netem += ["loss", f"{spec.loss:g}%"]
    rate = ["rate", NO_SHAPING_RATE, "quantum", str(HTB_QUANTUM)]
    argvs = [
        [
            "tc",
            "qdisc",
            "replace",
            *dev,
            "root",
            "handle",
            root,
            "htb",
            "default",
            f"{DEFAULT_CLASS & 0xFFFF:x}",
        ],
        ["tc", "class", "add", *dev, "parent", root, "classid", default, "htb", *rate],
        ["tc", "class", "add", *dev, "parent", root, "classid", delayed, "htb", *rate],
        [
            "tc",
            "qdisc",
            "add",
            *dev,
            "parent",
            delayed,
            "handle",
            handle_text(NETEM_HANDLE),
            "netem",
            "limit",
            "10000",
            *netem,
        ],
    ]
    for prio, (protocol, keys) in enumerate(filter_specs(spec), start=1):
        matches: list[str] = []
        for key in keys:
            value_mask, offset = key.split("+")
            value, mask = value_mask.split("/")
            matches += ["match", "u32", value, mask, "at", offset]
        proto = "ip" if protocol == ETH_P_IP else "ipv6"
        argvs.append(
            [
                "tc",
                "filter",
                "add",
                *dev,
                "parent",
                root,
                "protocol",
                proto,
                "prio",
                str(prio),
                "u32",
                *matches,
                "flowid",
                delayed,
            ]
        )
    return argvs


_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,252}$")


def require_host(value: str) -> str:
    """A host name or IP address."""
    if not isinstance(value, str) or not _HOST.match(value):
        raise InvalidArgument(f"host: {value!r} is not a host name or address")
    return value
