"""Run nftables JSON batches on a target: libnftables locally, the node's ``nft`` over SSH.

Local targets (``local``, ``netns:``, ``pid:``) use libnftables through its
Python binding (PyPI ``pip-nftables``, the same module Debian ships as
``python3-nftables``). A libnftables context opens its netlink socket when it
is created, so creating it in a thread that entered the target's namespace
(:func:`chaos_ext._core.targets.netns.run_in_netns`) makes every command act there
and nowhere else. Remote targets (``ssh:``, ``pod:``) run the node's own
``nft -j '<batch>'`` (nftables >= 0.9.x reads JSON on the command line with
``-j``), prefixed with ``nsenter`` for a pod. Both take the same JSON batch
from :mod:`chaos_ext.dns._ratelimit`.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol, TypeVar

from chaos_ext._core import procfs as _procfs
from chaos_ext._core.targets import identity, netns
from chaos_ext._core.targets.remote import RemoteShell, open_remote, reopen_remote
from chaos_ext._core.targets.spec import LOCAL_KINDS, Target, netns_path
from chaos_ext.dns import _ratelimit
from chaos_ext.dns.errors import DnsError
from chaos_ext.errors import PreflightFailed, PrivilegeMissing, TargetGone

__all__ = [
    "NftError",
    "NftRunner",
    "counters",
    "delete_table",
    "list_ours",
    "runner_for",
    "runner_from_recipe",
]

T = TypeVar("T")
_ABSENT = "No such file or directory"
_PROBE_SPEC = _ratelimit.RateLimitSpec(pps=10, burst=10, port=53, resolvers=())
#: What each object of the table batch needs from the kernel, in batch order.
_FEATURES = (
    "nf_tables (CONFIG_NF_TABLES with the inet family)",
    "the nftables limit expression (CONFIG_NFT_LIMIT)",
    "named counters (CONFIG_NF_TABLES)",
    "named counters (CONFIG_NF_TABLES)",
    "a postrouting filter chain (CONFIG_NF_TABLES_INET)",
    "a rule using the named limit and counters (CONFIG_NFT_OBJREF)",
)


class NftError(DnsError):
    """nftables refused a batch (its own message quoted)."""


class NftRunner(Protocol):
    where: str

    def run(self, batch: Mapping[str, Any]) -> dict[str, Any]: ...
    def preflight(self) -> dict[str, Any]: ...


def _first_missing(run: Callable[[Mapping[str, Any]], object]) -> str | None:
    """Build the table object by object (in a scratch namespace); name the first refusal."""
    table = _ratelimit.table_name(uuid.uuid4().hex[:12])
    items = _ratelimit.ruleset(_PROBE_SPEC, table)["nftables"]
    rules = len(items) - len(_FEATURES) + 1
    for count, feature in enumerate(_FEATURES, start=1):
        upto = count if count < len(_FEATURES) else count + rules - 1
        try:
            run({"nftables": items[:upto]})
            run(_ratelimit.delete_document(table))
        except NftError as exc:
            return f"{feature}: {exc}"
    return None


def _has_net_admin() -> bool:
    return _procfs.has_capability(_procfs.CAP_NET_ADMIN)


def _libnftables() -> Any:
    try:
        import nftables  # noqa: PLC0415 - optional at import time, named by the preflight
    except ImportError as exc:
        raise PreflightFailed(
            "the Python module nftables is missing: pip install pip-nftables"
        ) from exc
    try:
        return nftables.Nftables()
    except OSError as exc:
        raise PreflightFailed(
            f"libnftables.so.1 cannot be loaded ({exc}): apt-get install libnftables1"
        ) from exc


def _run_here(batch: Mapping[str, Any]) -> dict[str, Any]:
    """One batch through a fresh libnftables context in this thread's namespace."""
    nft = _libnftables()
    rc, output, error = nft.json_cmd(dict(batch))
    if rc != 0:
        raise NftError(str(error).strip() or f"libnftables returned {rc}")
    return output if isinstance(output, dict) else {}


class LocalNft:
    """This host, a named network namespace or a process's namespace (libnftables)."""

    def __init__(self, target: Target) -> None:
        self.target, self.where = target, target.where

    def _in_target(self, func: Callable[[], T]) -> T:
        path = netns_path(self.target)
        if path is None:
            return func()
        if not os.path.exists(path):
            raise TargetGone(f"target {self.where} does not exist ({path} is missing)")
        return netns.run_in_netns(path, func, timeout=30)

    def run(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        return self._in_target(lambda: _run_here(batch))

    def preflight(self) -> dict[str, Any]:
        if not _has_net_admin():
            raise PrivilegeMissing(f"no CAP_NET_ADMIN for {self.where}: run gameday as root")
        _libnftables()
        self._in_target(lambda: None)  # the target exists
        missing = netns.run_in_netns(None, lambda: _first_missing(_run_here), timeout=30)
        release = os.uname().release
        if missing:
            raise PreflightFailed(f"kernel {release} on {self.where} has no {missing}")
        return {"kernel": release, "target": self.where, "via": "libnftables"}


class RemoteNft:
    """A node over SSH, or a pod's namespace on its node: the node's ``nft``."""

    def __init__(self, shell: RemoteShell) -> None:
        self.shell, self.where = shell, shell.where

    def run(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        result = self.shell.run(["nft", "-j", json.dumps(batch, separators=(",", ":"))])
        if result.exit_code != 0:
            raise NftError(result.stderr.strip()[:300] or f"nft exited {result.exit_code}")
        return json.loads(result.stdout) if result.stdout.strip() else {}

    def _scratch_missing(self) -> str | None:
        session = self.shell.session
        name = f"gdpf-{uuid.uuid4().hex[:8]}"
        if session.run(["ip", "netns", "add", name]).exit_code != 0:
            raise PreflightFailed(f"cannot create a scratch network namespace on {self.where}")
        scratch = RemoteNft(RemoteShell(session, self.where, ["ip", "netns", "exec", name]))
        try:
            return _first_missing(scratch.run)
        finally:
            session.run(["ip", "netns", "delete", name])

    def preflight(self) -> dict[str, Any]:
        release = self.shell.session.check(["uname", "-r"]).strip()
        status = self.shell.check(["cat", "/proc/self/status"])
        if not _procfs.has_capability(_procfs.CAP_NET_ADMIN, status):
            raise PrivilegeMissing(f"no CAP_NET_ADMIN on {self.where}: use a root SSH user")
        if self.shell.session.run(["nft", "--version"]).exit_code != 0:
            raise PreflightFailed(f"no nft binary on {self.where}: install nftables there")
        missing = self._scratch_missing()
        if missing:
            raise PreflightFailed(f"kernel {release} on {self.where} has no {missing}")
        return {"kernel": release, "target": self.where, "via": "nft"}


@contextlib.contextmanager
def runner_for(
    target: Target, configuration: Mapping[str, Any] | None, secrets: Mapping[str, Any] | None
) -> Iterator[tuple[NftRunner, dict[str, Any]]]:
    """(runner, connection recipe for the ledger: no secrets)."""
    if target.kind in LOCAL_KINDS:
        yield LocalNft(target), {}
        return
    with open_remote(target, configuration, secrets) as (shell, connection):
        yield RemoteNft(shell), connection


@contextlib.contextmanager
def runner_from_recipe(
    target: Target, connection: Mapping[str, Any], netns_key: str | None = None
) -> Iterator[NftRunner]:
    """Reconnect for an undo from what the ledger holds (no Kubernetes call).

    A local target is reached by the namespace recorded (``netns_key``), not
    by its spelling alone (:func:`chaos_ext._core.targets.identity.reach`).
    """
    if "ssh" not in connection:
        yield LocalNft(identity.reach(target, netns_key))
        return
    with reopen_remote(target, connection) as shell:
        yield RemoteNft(shell)


def list_ours(runner: NftRunner) -> list[str]:
    """Our tables on the target (``gameday_dnsrate_*``); nothing else is read."""
    return _ratelimit.our_tables(runner.run({"nftables": [{"list": {"tables": {}}}]}))


def counters(runner: NftRunner, table: str) -> dict[str, Any]:
    """The limit and counters of one of our tables."""
    batch = {"nftables": [{"list": {"table": {"family": _ratelimit.FAMILY, "name": table}}}]}
    try:
        return _ratelimit.counters_of(runner.run(batch), table)
    except ValueError as exc:
        raise DnsError(f"{runner.where}: {exc}") from exc


def delete_table(runner: NftRunner, table: str) -> bool:
    """Delete exactly ``table``; False if it was already gone. Checked afterwards."""
    try:
        runner.run(_ratelimit.delete_document(table))
    except NftError as exc:
        if _ABSENT not in str(exc):
            raise
        return False
    if table in list_ours(runner):
        raise DnsError(f"{runner.where}: table {table} is still there after its deletion")
    return True
