"""Target strings: ``local``, ``netns:NAME``, ``pid:PID``, ``ssh:HOST[:PORT]``, ``pod:NS/NAME[/C]``.

Pure: parsing and labels only, nothing is looked up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from chaos_ext._core.validation import require_range
from chaos_ext.errors import InvalidArgument

__all__ = ["LOCAL_KINDS", "Target", "netns_path", "parse_target", "require_container_id"]

#: Targets reached from this process (netlink, libnftables); the others go over SSH.
LOCAL_KINDS = frozenset({"local", "netns", "pid"})

_TARGET = re.compile(
    r"^(?:(?P<local>local)|netns:(?P<netns>[A-Za-z0-9][A-Za-z0-9_.-]{0,62})"
    r"|pid:(?P<pid>[1-9][0-9]{0,9})"
    r"|ssh:(?P<host>[A-Za-z0-9][A-Za-z0-9_.:-]{0,252}?)(?::(?P<port>[0-9]{1,5}))?"
    r"|pod:(?P<ns>[a-z0-9][a-z0-9-]{0,62})/(?P<pod>[a-z0-9][a-z0-9.-]{0,252})"
    r"(?:/(?P<container>[a-z0-9][a-z0-9-]{0,62}))?)$"
)


@dataclass(frozen=True)
class Target:
    """Where the fault goes: ``local``, ``netns:NAME``, ``pid:PID``, ``ssh:HOST[:PORT]``,
    or ``pod:NAMESPACE/NAME[/CONTAINER]``."""

    kind: str
    name: str = ""
    pid: int = 0
    host: str = ""
    port: int = 22
    namespace: str = ""
    container: str = ""

    @property
    def where(self) -> str:
        """The target without an interface, e.g. ``netns:app`` or ``ssh:10.0.3.7:22``."""
        return {
            "local": "local",
            "netns": f"netns:{self.name}",
            "pid": f"pid:{self.pid}",
            "ssh": f"ssh:{self.host}:{self.port}",
            "pod": f"pod:{self.namespace}/{self.name}",
        }[self.kind]

    def label(self, interface: str) -> str:
        """The ledger's target text, e.g. ``netns:app/eth0``."""
        return f"{self.where}/{interface}"


def parse_target(text: str) -> Target:
    """Parse a target string; InvalidArgument quotes it and lists the forms."""
    match = _TARGET.match(text) if isinstance(text, str) else None
    if match is None:
        raise InvalidArgument(
            f"target: {text!r} is not a target; use 'local', 'netns:NAME', 'pid:PID', "
            "'ssh:HOST[:PORT]' or 'pod:NAMESPACE/NAME[/CONTAINER]'"
        )
    if match["local"]:
        return Target("local")
    if match["netns"]:
        return Target("netns", name=match["netns"])
    if match["pid"]:
        return Target("pid", pid=int(match["pid"]))
    if match["host"]:
        port = int(match["port"] or 22)
        require_range("target port", port, 1, 65535)
        return Target("ssh", host=match["host"], port=port)
    return Target(
        "pod", name=match["pod"], namespace=match["ns"], container=match["container"] or ""
    )


def netns_path(target: Target) -> str | None:
    """The namespace file a local target's work happens in (None: this process's own)."""
    if target.kind == "netns":
        return f"/run/netns/{target.name}"
    if target.kind == "pid":
        return f"/proc/{target.pid}/ns/net"
    if target.kind == "local":
        return None
    raise InvalidArgument(f"target {target.where} is not on this host")


_CONTAINER_ID = re.compile(r"^[0-9a-f]{12,128}$")


def require_container_id(value: str) -> str:
    """A container runtime id (hex), as found in a pod's status."""
    if not _CONTAINER_ID.match(value):
        raise InvalidArgument(f"container id {value!r} is not a runtime id")
    return value
