"""DNS error injection on a node over SSH (``ssh:``) or in a pod's namespace on its node (``pod:``).

The node gets what this machine gets for a local target, through the node's
own tools: the same nftables JSON batch run by the node's ``nft`` (in the
pod's namespace with ``nsenter``, :class:`chaos_ext.dns._nft.RemoteNft`), and
the same proxy, shipped as one zip application of three standard-library
modules (:func:`bundle`: the proxy, its wire work and
:mod:`chaos_ext.dns._dnserr_node`) and run by the node's ``python3`` (3.9 or
later) under ``setsid``, so it outlives the SSH session. Its files live in
``/run/gameday/dnserr/<entry id>.*`` (tmpfs: gone at the node's reboot, with
the namespace's table). The conntrack entries redirected to the proxy are
forgotten with the node's ``conntrack`` (Debian ``conntrack``); a node
without it keeps them until they expire (at most 120 s), unreachable, since
they live in a conntrack zone of ours that nothing enters once the table is
gone; the undo says so.

Nothing here lists a node's processes beyond our own files' names: the
proxy is found by its file (``pgrep -f``), stopped by SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import shlex
import time
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from chaos_ext._core import procfs as _procfs
from chaos_ext._core.contract import Configuration, Secrets
from chaos_ext._core.targets.remote import RemoteShell, identity_of, open_remote
from chaos_ext._core.targets.spec import Target
from chaos_ext.dns import _dnserr, _dnserr_node, _dnserr_proxy, _dnserr_wire, _nft
from chaos_ext.dns.errors import DnsError
from chaos_ext.errors import PreflightFailed, PrivilegeMissing

__all__ = ["RUN_DIR", "NodeSide", "bundle", "forget_flows", "node_side", "stop_proxy"]

RUN_DIR = "/run/gameday/dnserr"
_READY_TIMEOUT = 20.0
_MAIN = "from chaos_ext.dns._dnserr_node import main\n\nmain()\n"
_PYTHON_CHECK = "import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)"


@functools.cache
def bundle() -> bytes:
    """The proxy as one zip application (``python3 FILE.pyz``): three modules and a main."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("__main__.py", _MAIN)
        zipped.writestr("chaos_ext/__init__.py", "")
        zipped.writestr("chaos_ext/dns/__init__.py", "")
        for module in (_dnserr_node, _dnserr_proxy, _dnserr_wire):
            name = module.__name__.rsplit(".", 1)[-1]
            zipped.writestr(f"chaos_ext/dns/{name}.py", Path(str(module.__file__)).read_text())
    return out.getvalue()


def stem_of(token: str) -> str:
    """The proxy's files on the node, without their suffix (``.pyz .json .ready .log``)."""
    if not token.isalnum():
        raise DnsError(f"entry id {token!r} cannot name a file")
    return f"{RUN_DIR}/{token}"


def _pattern(token: str) -> str:
    """A ``pgrep -f`` pattern for the proxy that never matches the shell running pgrep."""
    return "[" + stem_of(token)[0] + "]" + stem_of(token)[1:] + "[.]pyz"


def proxies(shell: RemoteShell, token: str) -> list[int]:
    """The pids of the proxy with this token on the node."""
    found = shell.session.run(["pgrep", "-f", _pattern(token)])
    return [int(p) for p in found.stdout.split() if p.isdigit()]


def stop_proxy(shell: RemoteShell, token: str, grace: float = 3.0) -> int:
    """SIGTERM the token's proxy, SIGKILL it after ``grace``, remove its files; how many ran."""
    pids = proxies(shell, token)
    if pids:
        shell.session.run(["kill", "-TERM", *map(str, pids)])
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and proxies(shell, token):
            time.sleep(0.1)
        left = proxies(shell, token)
        if left:
            shell.session.run(["kill", "-KILL", *map(str, left)])
    stem = stem_of(token)
    shell.session.run(["rm", "-f", *(f"{stem}.{s}" for s in ("pyz", "json", "ready", "log"))])
    return len(pids)


def forget_flows(shell: RemoteShell, ports: list[int]) -> int | None:
    """Delete the node's conntrack entries redirected to ``ports``; None: no ``conntrack``."""
    if not ports:
        return 0
    if shell.session.run(["sh", "-c", "command -v conntrack"]).exit_code != 0:
        return None
    deleted = 0
    for argv in _dnserr_node.forget_commands(ports):
        # "conntrack v1.4.7 (conntrack-tools): 2 flow entries have been deleted."
        words = shell.run(argv).stderr.split()
        at = words.index("flow") if "flow" in words else 0
        deleted += int(words[at - 1]) if at and words[at - 1].isdigit() else 0
    return deleted


class NodeSide:
    """A remote target's side of the apply: its resolvers, preflight, proxy and nft."""

    def __init__(self, target: Target, shell: RemoteShell, connection: dict[str, Any]) -> None:
        self.target, self.shell, self.connection = target, shell, connection
        self.runner = _nft.RemoteNft(shell)
        self.where = shell.where
        self.identity = identity_of(connection)
        self.recipe: dict[str, Any] = {"connection": connection}

    def netns(self) -> str:
        """The namespace the proxy enters on the node (a pod's; a node's own: none)."""
        return f"/proc/{int(self.connection['pid'])}/ns/net" if "pid" in self.connection else ""

    def resolvers(self) -> tuple[_dnserr.Address, ...]:
        pid = self.connection.get("pid")
        path = f"/proc/{int(pid)}/root/etc/resolv.conf" if pid else "/etc/resolv.conf"
        found = self.shell.session.run(["cat", path])
        return _dnserr.parse_resolv_conf(found.stdout) if found.exit_code == 0 else ()

    def preflight(self) -> None:
        status = self.shell.check(["cat", "/proc/self/status"])
        if not _procfs.has_capability(_procfs.CAP_NET_ADMIN, status):
            raise PrivilegeMissing(f"no CAP_NET_ADMIN on {self.where}: use a root SSH user")
        session = self.shell.session
        for argv, need in (
            (["nft", "--version"], "nft (Debian nftables)"),
            (["python3", "-c", _PYTHON_CHECK], "python3 3.9 or later (the proxy runs on it)"),
            (["setsid", "--version"], "setsid (util-linux)"),
            (["pgrep", "--version"], "pgrep (procps: the undo finds the proxy with it)"),
        ):
            if session.run(argv).exit_code != 0:
                raise PreflightFailed(f"{self.where} has no {need}: install it on the node")

    def start_proxy(self, payload: Mapping[str, Any], token: str) -> tuple[dict[str, int], int]:
        """Ship and start the proxy; its ports by resolver and its pid once it is ready."""
        stem, session = stem_of(token), self.shell.session
        quoted = shlex.quote(stem)
        session.check(
            ["sh", "-c", f"umask 077 && mkdir -p {RUN_DIR} && cat > {quoted}.pyz"],
            stdin=bundle(),
        )
        body = json.dumps({**payload, "files": stem}).encode()
        session.check(["sh", "-c", f"umask 077 && cat > {quoted}.json"], stdin=body)
        session.check(
            [
                "sh",
                "-c",
                f"setsid python3 {quoted}.pyz < {quoted}.json > {quoted}.ready 2> {quoted}.log &",
            ]
        )
        ready = self._ready(stem)
        if "error" in ready:
            stop_proxy(self.shell, token)
            raise DnsError(f"the DNS error proxy on {self.where} failed: {ready['error']}")
        return {str(k): int(v) for k, v in ready["ports"].items()}, int(ready["pid"])

    def _ready(self, stem: str) -> dict[str, Any]:
        deadline = time.monotonic() + _READY_TIMEOUT
        while time.monotonic() < deadline:
            line = self.shell.session.run(["cat", f"{stem}.ready"]).stdout.split("\n", 1)[0]
            if line.strip():
                parsed: dict[str, Any] = json.loads(line)
                return parsed
            time.sleep(0.1)
        log = self.shell.session.run(["tail", "-n", "3", f"{stem}.log"]).stdout.strip()
        return {"error": f"no ready line within {_READY_TIMEOUT:.0f} s ({log or 'no log'})"}


@contextlib.contextmanager
def node_side(target: Target, configuration: Configuration, secrets: Secrets) -> Iterator[NodeSide]:
    """Connect to the target's node (a pod: resolved over the Kubernetes API first)."""
    with open_remote(target, configuration, secrets) as (shell, connection):
        yield NodeSide(target, shell, connection)
