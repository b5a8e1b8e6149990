"""The DNS error proxy's entry point on a node (``ssh:``, ``pod:`` targets): standard library only.

:mod:`chaos_ext.dns._dnserr_remote` ships this module, the proxy
(:mod:`chaos_ext.dns._dnserr_proxy`) and its wire work
(:mod:`chaos_ext.dns._dnserr_wire`) to the node as one zip application run by
the node's own ``python3``: nothing of gameday is installed there. It reads
the payload on stdin, enters the target's namespace (a pod's
``/proc/PID/ns/net``; a node's own: none), binds, writes its ready line (the
ports and its pid) on stdout (a file beside it), serves until SIGTERM or its
cap, and on its way out does on the node what the local proxy does here:
deletes its nftables table with the node's ``nft``, forgets the conntrack
entries redirected to its ports with the node's ``conntrack`` (when the node
has it) and removes its own files. So a proxy that outlives its runner, its
watchdog and its SSH session still ends at its cap and leaves nothing.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any

__all__ = ["cleanup_on_node", "forget_commands", "main"]


def _quietly(argv: list[str]) -> None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=20, check=False
        )


def forget_commands(ports: list[int]) -> list[list[str]]:
    """The ``conntrack`` commands that delete the flows whose reply comes from one of
    ``ports`` (IPv4 and IPv6, UDP and TCP)."""
    return [
        ["conntrack", "-D", "-f", family, "-p", protocol, "--reply-port-src", str(port)]
        for port in ports
        for family in ("ipv4", "ipv6")
        for protocol in ("udp", "tcp")
    ]


def cleanup_on_node(payload: dict[str, Any], ports: list[int]) -> None:
    """Delete our table, forget our flows (best effort: the undo checks), remove our files."""
    _quietly(["nft", "delete", "table", "inet", str(payload["table"])])
    for argv in forget_commands(ports):
        _quietly(argv)
    stem = str(payload.get("files") or "")
    if stem:
        for path in glob.glob(glob.escape(stem) + ".*"):
            with contextlib.suppress(OSError):
                os.unlink(path)


def main() -> None:
    """Payload on stdin, the ready line on stdout, SIGTERM to stop (as the local helper)."""
    from chaos_ext.dns._dnserr_proxy import work  # noqa: PLC0415 - inside the zip on the node

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the SSH session ending is not ours
    reported = False

    def ready(report: dict[str, Any]) -> None:
        nonlocal reported
        if not reported:
            reported = True
            sys.stdout.write(json.dumps(report) + "\n")
            sys.stdout.flush()

    payload: dict[str, Any] = {}
    try:
        payload = json.loads(sys.stdin.read() or "{}")
        work(payload, ready, stop, on_exit=cleanup_on_node)
    except Exception as exc:  # noqa: BLE001 - the only channel back is the ready line
        ready({"error": f"{type(exc).__name__}: {exc}"})
        if payload:
            cleanup_on_node(payload, [])
        raise SystemExit(1) from None
