"""May a fault change this target? CAP_NET_ADMIN and SSH reachability, checked for a plan.

Preflight checks (docs/conventions.md §7) for the faults that change a
target's network stack (``network.add_latency``: qdiscs; ``dns.limit_dns_rate``:
nftables), made by :func:`target_checks`:

* a local target (``local``, ``netns:``, ``pid:``) is changed by this process,
  so ``CAP_NET_ADMIN`` must be in its effective set (``CapEff`` of
  ``/proc/self/status``, bit 12): check ``CAP_NET_ADMIN``;
* a remote one (``ssh:``, ``pod:``) is changed over SSH: check ``SSH
  reachable`` connects as the action would (the configured user and key, the
  host key checked against ``ssh_known_hosts``, every step with a timeout) and
  runs ``true``; then check ``CAP_NET_ADMIN`` reads the SSH user's
  ``/proc/self/status`` there (``cat``). A ``pod:`` target is first resolved to
  its node over the Kubernetes API, as the action does; the API server is asked
  first (access reviews) whether the credentials may read the pod and nodes.

Nothing is changed anywhere: the only remote commands are ``true`` and ``cat``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from chaos_ext._core import procfs
from chaos_ext._core.contract import NET_ADMIN_CHECK, preflight_check
from chaos_ext._core.ssh import SshSession, SshSettings
from chaos_ext._core.targets import pod
from chaos_ext._core.targets.spec import LOCAL_KINDS, Target
from chaos_ext.errors import ChaosExtError

__all__ = [
    "NET_ADMIN_CHECK",
    "SSH_CHECK",
    "net_admin_here",
    "reached",
    "ssh_checks",
    "target_checks",
]

SSH_CHECK = "SSH reachable"
_COMMAND_TIMEOUT = 10.0


def _capabilities(status_text: str) -> str:
    return f"CapEff {procfs.effective_capabilities(status_text):#x}"


def net_admin_here(where: str) -> dict[str, Any]:
    """Whether this process has CAP_NET_ADMIN in its effective set (for a local ``where``)."""
    try:
        status = procfs.own_status()
    except OSError as exc:
        return preflight_check(NET_ADMIN_CHECK, False, f"cannot read /proc/self/status: {exc}")
    who = f"this process (pid {os.getpid()}, uid {os.getuid()})"
    if procfs.has_capability(procfs.CAP_NET_ADMIN, status):
        return preflight_check(
            NET_ADMIN_CHECK, True, f"{who} has it, as {where} needs ({_capabilities(status)})"
        )
    fix = (
        "root without it: it was dropped (bounding set, a container's capabilities.drop);"
        " grant it (securityContext.capabilities.add: [NET_ADMIN])"
        if os.getuid() == 0
        else "run gameday as root, or grant it (setcap, capabilities.add: [NET_ADMIN])"
    )
    return preflight_check(
        NET_ADMIN_CHECK,
        False,
        f"{who} lacks CAP_NET_ADMIN in its effective set ({_capabilities(status)}, bit 12"
        f" clear): changing {where} would fail; {fix}",
    )


def ssh_checks(settings: SshSettings, where: str) -> list[dict[str, Any]]:
    """``SSH reachable`` (connect, run ``true``), then the SSH user's CAP_NET_ADMIN there."""
    try:
        with SshSession(settings) as session:
            ran = session.run(["true"], timeout=_COMMAND_TIMEOUT)
            if ran.exit_code != 0:
                reason = f"`true` exited {ran.exit_code}: {ran.stderr.strip()[:200]}"
                return [preflight_check(SSH_CHECK, False, f"{settings.where}: {reason}")]
            status = session.check(["cat", "/proc/self/status"], timeout=_COMMAND_TIMEOUT)
            key = session.host_key
    except ChaosExtError as exc:
        return [preflight_check(SSH_CHECK, False, f"unreachable: {exc}")]
    reached = preflight_check(
        SSH_CHECK, True, f"{settings.where}: authenticated, host key {key}, `true` ran"
    )
    if procfs.has_capability(procfs.CAP_NET_ADMIN, status):
        detail = f"the SSH user {settings.user} on {where} has it ({_capabilities(status)})"
        return [reached, preflight_check(NET_ADMIN_CHECK, True, detail)]
    detail = (
        f"the SSH user {settings.user} on {where} lacks CAP_NET_ADMIN ({_capabilities(status)},"
        " bit 12 clear): use a root SSH user"
    )
    return [reached, preflight_check(NET_ADMIN_CHECK, False, detail)]


def _pod_node(
    target: Target, configuration: Mapping[str, Any] | None, secrets: Mapping[str, Any] | None
) -> tuple[list[dict[str, Any]], SshSettings | None]:
    """(checks, SSH settings of the pod's node; None: it cannot be found)."""
    # the Kubernetes client takes ~1.5 s to import: only pod targets pay for it
    from chaos_ext._core import k8s, k8s_access  # noqa: PLC0415

    wanted = [
        k8s_access.Access(
            "get", "pods", namespace=target.namespace, name=target.name, why="find its node"
        ),
        k8s_access.Access("get", "nodes", why="find the node's address to SSH to"),
    ]
    checks = k8s_access.access_checks(k8s.api_client(secrets), wanted)
    if not all(c["ok"] for c in checks):
        return checks, None
    try:
        placement = pod.resolve_pod(target, secrets)
    except ChaosExtError as exc:
        unreached = preflight_check(SSH_CHECK, False, f"{target.where}: no node to reach: {exc}")
        return [*checks, unreached], None
    port = int((configuration or {}).get("ssh_node_port", 22))
    return checks, SshSettings.from_activity(placement.node_address, port, configuration, secrets)


def target_checks(
    target: Target, configuration: Mapping[str, Any] | None, secrets: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """The permission checks of a fault on ``target`` (see the module docstring)."""
    if target.kind in LOCAL_KINDS:
        return [net_admin_here(target.where)]
    if target.kind == "ssh":
        settings = SshSettings.from_activity(target.host, target.port, configuration, secrets)
        return ssh_checks(settings, target.where)
    checks, node = _pod_node(target, configuration, secrets)
    return checks if node is None else [*checks, *ssh_checks(node, target.where)]


def reached(target: Target, checks: list[dict[str, Any]]) -> bool:
    """Whether :func:`target_checks` reached ``target`` (a local one always is)."""
    return target.kind in LOCAL_KINDS or any(c["check"] == SSH_CHECK and c["ok"] for c in checks)
