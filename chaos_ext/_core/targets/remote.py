"""Run commands on a remote target: a node over SSH, or a pod's network namespace on its node.

``open_remote`` connects (resolving a pod to its node and container pid over
the Kubernetes API) and returns the connection details the fault ledger may
keep (never a key or passphrase); ``reopen_remote`` reconnects from them for
an undo, without calling Kubernetes again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chaos_ext._core.ssh import CommandOutput, SshSession, SshSettings
from chaos_ext._core.targets import pod
from chaos_ext._core.targets.spec import Target

__all__ = ["RemoteShell", "identity_of", "open_remote", "reopen_remote"]


@dataclass
class RemoteShell:
    """Commands on a node, optionally prefixed (``nsenter --net=/proc/PID/ns/net``)."""

    session: SshSession
    where: str
    prefix: list[str] = field(default_factory=list)

    def run(
        self, argv: Sequence[str], timeout: float = 30.0, stdin: bytes | None = None
    ) -> CommandOutput:
        """Run ``prefix + argv``; the caller reads the exit code."""
        return self.session.run([*self.prefix, *argv], timeout=timeout, stdin=stdin)

    def check(self, argv: Sequence[str], timeout: float = 30.0) -> str:
        """Run ``prefix + argv``; NetworkError on a non-zero exit."""
        return self.session.check([*self.prefix, *argv], timeout=timeout)


@contextlib.contextmanager
def open_remote(
    target: Target, configuration: Mapping[str, Any] | None, secrets: Mapping[str, Any] | None
) -> Iterator[tuple[RemoteShell, dict[str, Any]]]:
    """(shell, connection recipe for the ledger) for an ``ssh:`` or ``pod:`` target."""
    if target.kind == "ssh":
        settings = SshSettings.from_activity(target.host, target.port, configuration, secrets)
        with SshSession(settings) as session:
            yield RemoteShell(session, target.where), {"ssh": _pinned(settings, session)}
        return
    placement = pod.resolve_pod(target, secrets)
    port = int((configuration or {}).get("ssh_node_port", 22))
    settings = SshSettings.from_activity(placement.node_address, port, configuration, secrets)
    with SshSession(settings) as session:
        pid = pod.container_pid(session, placement)
        where = f"pod:{target.namespace}/{target.name}@{placement.node}"
        prefix = ["nsenter", f"--net=/proc/{pid}/ns/net"]
        yield (
            RemoteShell(session, where, prefix),
            {
                "ssh": _pinned(settings, session),
                "pid": pid,
                "node": placement.node,
                "where": where,
            },
        )


@contextlib.contextmanager
def reopen_remote(target: Target, connection: Mapping[str, Any]) -> Iterator[RemoteShell]:
    """Reconnect from what :func:`open_remote` recorded (no Kubernetes call).

    The host must present the key recorded when the fault was made
    (TargetMismatch otherwise, before any command runs).
    """
    pinned = connection["ssh"].get("host_key") or None
    settings = SshSettings.from_recipe(connection["ssh"])
    with SshSession(settings, expect_host_key=pinned) as session:
        if "pid" in connection:
            prefix = ["nsenter", f"--net=/proc/{int(connection['pid'])}/ns/net"]
            yield RemoteShell(session, str(connection["where"]), prefix)
        else:
            yield RemoteShell(session, target.where)


def _pinned(settings: SshSettings, session: SshSession) -> dict[str, Any]:
    """The connection for the ledger (no secrets) with the host key seen now."""
    return {**settings.recipe(), "host_key": session.host_key}


def identity_of(connection: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ledger identity of a connection recipe: the SSH host by its key; None: this machine."""
    ssh = connection.get("ssh")
    if not ssh:
        return None
    pinned = {"host": ssh.get("host"), "port": ssh.get("port"), "host_key": ssh.get("host_key")}
    return {"scope": "ssh", "ssh": pinned, "node": connection.get("node")}
