"""Sandbox backends: host network namespaces, or the same inside a qemu micro-VM.

``netns`` builds the topology in this machine's network namespaces. ``vm``
boots Debian's kernel in a micro-VM (see :mod:`chaos_ext._vm`) and builds the
same topology there with the netns backend, because faults such as netem need
kernel features this host may lack. ``auto`` picks netns when the host kernel
can take every fault of the default game day, else vm.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from chaos_ext.errors import InvalidArgument, SandboxError
from chaos_ext.sandbox import _control, _vmhost
from chaos_ext.sandbox._state import load_state

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
    if backend == "netns":
        _control.up(prefix, app_mode, say)
    else:
        _vmhost.up(prefix, app_mode, say)


def down(prefix: str, say: Progress) -> None:
    state = load_state(prefix)
    if state is not None and state.backend == "vm":
        _vmhost.down(prefix, say)
        return
    _control.down(prefix, say)


def status(prefix: str) -> dict[str, Any]:
    state = load_state(prefix)
    if state is not None and state.backend == "vm":
        return _vmhost.status(prefix)
    return _control.status(prefix)


def run_in_sandbox(prefix: str, argv: Sequence[str], journal_dir: Path, timeout: float) -> int:
    """Run a gameday command in the sandbox's monitoring host; journals land in journal_dir."""
    state = load_state(prefix)
    if state is None:
        raise SandboxError(f"sandbox {prefix!r} is not up: `gameday sandbox up` first")
    if state.backend == "vm":
        return _vmhost.run(prefix, argv, journal_dir, timeout)
    return _control.run(prefix, argv, journal_dir, timeout)
