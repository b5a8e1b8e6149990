"""Sandbox backends: host network namespaces, plus a netem node VM where the kernel lacks netem.

``netns`` builds the topology in this machine's network namespaces. ``vm``
builds the same, natively, and routes the app's traffic to the database through
a micro-VM running Debian's kernel (see :mod:`chaos_ext._products.sandbox._node`), where
the DB latency fault's netem goes; nothing else runs emulated. ``auto`` picks
netns when the host kernel can take every fault of the default game day, else vm.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from chaos_ext._products.sandbox import _control
from chaos_ext._products.sandbox._state import load_state
from chaos_ext._products.sandbox.errors import SandboxError
from chaos_ext.errors import InvalidArgument

__all__ = ["choose", "down", "run_in_sandbox", "status", "up"]

Progress = Callable[[str], None]


def _host_missing_features() -> list[str]:
    from chaos_ext.network.kernel import missing_features  # noqa: PLC0415 - pyroute2 probe

    return list(missing_features())


def choose(requested: str) -> tuple[str, str]:
    """(backend, why) for ``auto``, ``netns`` or ``vm``."""
    if requested == "netns":
        return "netns", "requested"
    if requested == "vm":
        return "vm", "requested"
    if requested != "auto":
        raise InvalidArgument(f"backend: {requested!r} is not auto, netns or vm")
    missing = _host_missing_features()
    if not missing:
        return "netns", "this kernel has netem, htb and u32"
    return "vm", f"this kernel lacks {', '.join(missing)} (needed for the DB latency fault)"


def up(backend: str, prefix: str, app_mode: str, say: Progress) -> None:
    _control.up(prefix, app_mode, say, backend)


def down(prefix: str, say: Progress) -> None:
    _control.down(prefix, say)


def status(prefix: str) -> dict[str, Any]:
    return _control.status(prefix)


def run_in_sandbox(prefix: str, argv: Sequence[str], journal_dir: Path, timeout: float) -> int:
    """Run a gameday command in the sandbox's monitoring host; journals land in journal_dir."""
    if load_state(prefix) is None:
        raise SandboxError(f"sandbox {prefix!r} is not up: `gameday sandbox up` first")
    stopped = {
        name: svc.get("pid")
        for name, svc in _control.status(prefix)["services"].items()
        if not svc["running"]
    }
    if stopped:
        # Without its traffic (or its exporter, or Prometheus) the sandbox would judge a
        # fault against an idle app: "held" that proves nothing. Refuse before injecting.
        listed = ", ".join(f"{name} (pid {pid})" for name, pid in sorted(stopped.items()))
        raise SandboxError(
            f"sandbox {prefix!r} is broken, nothing was run: not running: {listed}. The "
            "background traffic stops after 1 h; `gameday sandbox down` and `up` again"
        )
    return _control.run(prefix, argv, journal_dir, timeout)
