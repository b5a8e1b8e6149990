"""Pick the executor for a target: netlink for local ones, ``tc`` over SSH for nodes and pods."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from chaos_ext._core.targets.identity import NETNS_KEY, reach
from chaos_ext._core.targets.remote import open_remote, reopen_remote
from chaos_ext._core.targets.spec import LOCAL_KINDS, Target, parse_target
from chaos_ext.network import _local, _remote, _spec

__all__ = ["Executor", "executor_for", "executor_from_recipe"]


class Executor(Protocol):
    def preflight(self, interface: str) -> dict[str, Any]: ...
    def snapshot(self, interface: str) -> dict[str, Any]: ...
    def apply(self, interface: str, spec: _spec.LatencySpec) -> None: ...
    def restore(self, interface: str, snap: dict[str, Any]) -> str: ...
    def remove_unrecorded(self, interface: str) -> str: ...


class LocalExecutor:
    """This host or one of its namespaces, over netlink."""

    def __init__(self, target: Target) -> None:
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
    target: Target,
    configuration: Mapping[str, Any] | None,
    secrets: Mapping[str, Any] | None,
) -> Iterator[tuple[Executor, dict[str, Any]]]:
    """(executor, connection recipe for the ledger: no secrets)."""
    if target.kind in LOCAL_KINDS:
        yield LocalExecutor(target), {}
        return
    with open_remote(target, configuration, secrets) as (shell, connection):
        yield _remote.RemoteTc(shell.session, shell.where, shell.prefix), connection


@contextlib.contextmanager
def executor_from_recipe(recipe: Mapping[str, Any]) -> Iterator[Executor]:
    """Reconnect for an undo from what the ledger holds (no Kubernetes call needed)."""
    target = parse_target(recipe["target"])
    conn = recipe.get("connection", {})
    if "ssh" not in conn:  # by the namespace recorded, not by its spelling alone
        yield LocalExecutor(reach(target, recipe.get(NETNS_KEY)))
        return
    with reopen_remote(target, conn) as shell:
        yield _remote.RemoteTc(shell.session, shell.where, shell.prefix)
