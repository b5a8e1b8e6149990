"""Remote targets: a node over SSH (optionally inside a pod's network namespace via nsenter).

The node has no chaos_ext: the tree is built with the node's own ``tc`` binary,
each command an argument list quoted for the remote shell (see
:mod:`chaos_ext._core.ssh`), the same tree as the netlink path
(:func:`chaos_ext.network._spec.tc_apply_argvs`).

Exact restore on remote targets covers a *default* root (the kernel's own
qdisc, handle 0): the snapshot is ``tc -j qdisc show``; the undo deletes the
latency tree and checks the root is back. An interface that already has a
configured root qdisc is refused by the preflight (nothing is changed), since
``tc`` cannot replay an arbitrary tree exactly; the netlink path can.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from chaos_ext._core import procfs as _procfs
from chaos_ext._core.ssh import SshSession
from chaos_ext.errors import PreflightFailed, PrivilegeMissing
from chaos_ext.network import _spec
from chaos_ext.network.errors import NetworkError

__all__ = ["RemoteTc"]


class RemoteTc:
    """``tc`` on a node, optionally prefixed (``nsenter --net=/proc/PID/ns/net``)."""

    def __init__(self, session: SshSession, where: str, prefix: list[str] | None = None) -> None:
        self.session, self.where, self.prefix = session, where, list(prefix or [])

    def _tc(self, argv: list[str], check: bool = True) -> str:
        full = [*self.prefix, *argv]
        if check:
            return self.session.check(full)
        return self.session.run(full).stdout

    def _probe(self) -> list[str]:
        name = f"gdpf-{uuid.uuid4().hex[:8]}"
        run = self.session.run
        if run(["ip", "netns", "add", name]).exit_code != 0:
            raise PreflightFailed(f"cannot create a scratch network namespace on {self.where}")
        exec_ = ["ip", "netns", "exec", name, "tc"]
        steps = [
            (
                "sch_htb",
                ["qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "1"],
            ),
            (
                "sch_htb",
                [
                    "class",
                    "add",
                    "dev",
                    "lo",
                    "parent",
                    "1:",
                    "classid",
                    "1:1",
                    "htb",
                    "rate",
                    "1gbit",
                ],
            ),
            (
                "sch_netem",
                [
                    "qdisc",
                    "add",
                    "dev",
                    "lo",
                    "parent",
                    "1:1",
                    "handle",
                    "2:",
                    "netem",
                    "delay",
                    "1ms",
                ],
            ),
            (
                "cls_u32",
                [
                    "filter",
                    "add",
                    "dev",
                    "lo",
                    "parent",
                    "1:",
                    "protocol",
                    "ip",
                    "prio",
                    "1",
                    "u32",
                    "match",
                    "u32",
                    "0",
                    "0",
                    "at",
                    "16",
                    "flowid",
                    "1:1",
                ],
            ),
        ]
        missing: list[str] = []
        try:
            for feature, args in steps:
                if feature in missing:
                    continue
                result = run([*exec_, *args])
                if result.exit_code != 0:
                    missing.append(feature)
                    if feature == "sch_htb":
                        missing += ["sch_netem", "cls_u32"]
        finally:
            run(["ip", "netns", "delete", name])
        return sorted(set(missing))

    def preflight(self, interface: str) -> dict[str, Any]:
        """Kernel features, CAP_NET_ADMIN and a restorable root; PreflightFailed otherwise."""
        release = self.session.check(["uname", "-r"]).strip()
        status = self.session.check([*self.prefix, "cat", "/proc/self/status"])
        if not _procfs.has_capability(_procfs.CAP_NET_ADMIN, status):
            raise PrivilegeMissing(f"no CAP_NET_ADMIN on {self.where}: use a root SSH user")
        missing = self._probe()
        if missing:
            raise PreflightFailed(f"kernel {release} on {self.where} has no {', '.join(missing)}")
        snap = self.snapshot(interface)
        if not snap["default_root"]:
            raise PreflightFailed(
                f"{self.where}/{interface} has a configured root qdisc ({snap['root_kind']}); "
                "remote targets restore only the kernel's default root exactly: nothing changed"
            )
        return {
            "kernel": release,
            "target": self.where,
            "features": ["sch_htb", "sch_netem", "cls_u32"],
        }

    def snapshot(self, interface: str) -> dict[str, Any]:
        out = self._tc(["tc", "-j", "qdisc", "show", "dev", interface])
        try:
            qdiscs = json.loads(out or "[]")
        except json.JSONDecodeError as exc:
            raise NetworkError(f"unexpected tc output on {self.where}: {out[:200]!r}") from exc
        root = next((q for q in qdiscs if q.get("root")), None)
        return {
            "root_kind": root.get("kind") if root else None,
            "default_root": root is None or root.get("handle") == "0:",
            "latency_active": root is not None
            and root.get("handle") == f"{_spec.ROOT_HANDLE >> 16:x}:",
            "qdiscs": [{k: q.get(k) for k in ("kind", "handle", "parent", "root")} for q in qdiscs],
        }

    def apply(self, interface: str, spec: _spec.LatencySpec) -> None:
        for argv in _spec.tc_apply_argvs(spec, interface):
            self._tc(argv)

    def remove_unrecorded(self, interface: str) -> str:
        """Our tree without a ledger entry: delete the root (the kernel's default returns)."""
        if not self.snapshot(interface)["latency_active"]:
            return f"{self.where}/{interface}: no latency tree"
        self._tc(["tc", "qdisc", "del", "dev", interface, "root"])
        return f"{self.where}/{interface}: latency tree without a ledger entry deleted"

    def restore(self, interface: str, snap: dict[str, Any]) -> str:
        now = self.snapshot(interface)
        if now["qdiscs"] == snap["qdiscs"]:
            return f"{self.where}/{interface}: qdisc tree already as before"
        if not now["latency_active"]:
            return f"{self.where}/{interface}: latency tree gone and root changed since; left alone"
        self._tc(["tc", "qdisc", "del", "dev", interface, "root"])
        after = self.snapshot(interface)
        if after["qdiscs"] != snap["qdiscs"]:
            raise NetworkError(
                f"{self.where}/{interface}: root after restore {after['qdiscs']} differs from "
                f"the snapshot {snap['qdiscs']}"
            )
        return f"{self.where}/{interface}: default root qdisc restored"
