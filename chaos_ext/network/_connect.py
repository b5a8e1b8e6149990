"""Pick the executor for a target: netlink for local ones, ``tc`` over SSH for nodes and pods."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from chaos_ext._ssh import SshSession, SshSettings
from chaos_ext.network import _local, _pod, _remote, _spec

__all__ = ["Executor", "executor_for", "executor_from_recipe", "identity_of"]


class Executor(Protocol):
    def preflight(self, interface: str) -> dict[str, Any]: ...
    def snapshot(self, interface: str) -> dict[str, Any]: ...
    def apply(self, interface: str, spec: _spec.LatencySpec) -> None: ...
    def restore(self, interface: str, snap: dict[str, Any]) -> str: ...
    def remove_unrecorded(self, interface: str) -> str: ...


class LocalExecutor:
    """This host or one of its namespaces, over netlink."""

    def __init__(self, target: _spec.Target) -> None:
        self.target = target

    def preflight(self, interface: str) -> dict[str, Any]:
        info = _local.preflight(self.target)
        _local.snapshot(self.target, interface)  # the interface must exist
        return info

    def snapshot(self, interface: str) -> dict[str, Any]:
        return _local.snapshot(self.target, interface)

    def apply(self, interface: str, spec: _spec.LatencySpec) -> None:
        _local.apply(self.target, interface, spec)

    def restore(self, interface: str, snap: dict[str, Any]) -> str:
        return _local.restore(self.target, interface, snap)

    def remove_unrecorded(self, interface: str) -> str:
        return _local.remove_unrecorded(self.target, interface)


@contextlib.contextmanager
def executor_for(
    target: _spec.Target,
    configuration: Mapping[str, Any] | None,
    secrets: Mapping[str, Any] | None,
) -> Iterator[tuple[Executor, dict[str, Any]]]:
    """(executor, connection recipe for the ledger: no secrets)."""
    if target.kind in ("local", "netns", "pid"):
        yield LocalExecutor(target), {}
        return
    if target.kind == "ssh":
        settings = SshSettings.from_activity(target.host, target.port, configuration, secrets)
        with SshSession(settings) as session:
            yield (
                _remote.RemoteTc(session, f"ssh:{target.host}:{target.port}"),
                {"ssh": {**settings.recipe(), "host_key": session.host_key}},
            )
        return
    placement = _pod.resolve_pod(target, secrets)
    port = int((configuration or {}).get("ssh_node_port", 22))
    settings = SshSettings.from_activity(placement.node_address, port, configuration, secrets)
    with SshSession(settings) as session:
        pid = _pod.container_pid(session, placement)
        where = f"pod:{target.namespace}/{target.name}@{placement.node}"
        prefix = ["nsenter", f"--net=/proc/{pid}/ns/net"]
        yield _remote.RemoteTc(session, where, prefix), {
            "ssh": {**settings.recipe(), "host_key": session.host_key}, "pid": pid,
            "node": placement.node, "where": where,
        }  # fmt: skip


@contextlib.contextmanager
def executor_from_recipe(recipe: Mapping[str, Any]) -> Iterator[Executor]:
    """Reconnect for an undo from what the ledger holds (no Kubernetes call needed)."""
    target = _spec.parse_target(recipe["target"])
    conn = recipe.get("connection", {})
    if "ssh" not in conn:
        yield LocalExecutor(target)
        return
    pinned = conn["ssh"].get("host_key") or None
    with SshSession(SshSettings.from_recipe(conn["ssh"]), expect_host_key=pinned) as session:
        if "pid" in conn:
            prefix = ["nsenter", f"--net=/proc/{int(conn['pid'])}/ns/net"]
            yield _remote.RemoteTc(session, conn["where"], prefix)
        else:
            yield _remote.RemoteTc(session, f"ssh:{target.host}:{target.port}")


def identity_of(connection: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ledger identity of a connection recipe: the SSH host by its key; None: this machine."""
    ssh = connection.get("ssh")
    if not ssh:
        return None
    pinned = {"host": ssh.get("host"), "port": ssh.get("port"), "host_key": ssh.get("host_key")}
    return {"scope": "ssh", "ssh": pinned, "node": connection.get("node")}
