"""The app's resolver configuration for ``/search``, and a node-local DNS cache for the tuned app.

A pod's resolv.conf, with the sandbox's domain in place of ``cluster.local``::

    nameserver <dnsmasq, or 169.254.20.10 for the tuned app>
    search default.svc.sandbox.test svc.sandbox.test sandbox.test
    options ndots:5 timeout:1 attempts:2

so ``getaddrinfo("db")`` asks ``db.default.svc.sandbox.test`` and
``db.svc.sandbox.test`` (NXDOMAIN) before ``db.sandbox.test``, A and AAAA
each: 6 packets a lookup. The tuned app's nameserver is a second dnsmasq in
the app's namespace (the "node"), on NodeLocal DNSCache's link-local address
169.254.20.10 on loopback: it caches answers and NXDOMAINs for 30 s and asks
the sandbox's dnsmasq only on a miss, as NodeLocal DNSCache does in front of
kube-dns or the VPC resolver.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chaos_ext._products.sandbox.errors import SandboxError
from chaos_ext._products.sandbox.servers import dnsmasq

__all__ = ["NODELOCAL_ADDRESS", "SEARCH", "prepare", "resolv_conf"]

NODELOCAL_ADDRESS = "169.254.20.10"
SEARCH = ("default.svc.sandbox.test", "svc.sandbox.test", "sandbox.test")
_CACHE_ARGS = ("--cache-size=1000", "--neg-ttl=30", "--min-cache-ttl=30")


def resolv_conf(nameserver: str) -> str:
    return (
        f"nameserver {nameserver}\nsearch {' '.join(SEARCH)}\n"
        "options ndots:5 timeout:1 attempts:2\n"
    )


def _start_cache(
    netns: str, upstream: str, work: Path, ready_timeout: float, tag: Sequence[str]
) -> dnsmasq.Dnsmasq:
    added = subprocess.run(
        ["ip", "-n", netns, "addr", "replace", f"{NODELOCAL_ADDRESS}/32", "dev", "lo"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if added.returncode != 0:
        raise SandboxError(f"cannot add {NODELOCAL_ADDRESS} in {netns}: {added.stderr.strip()}")
    return dnsmasq.start(
        address=NODELOCAL_ADDRESS,
        port=53,
        prefix=["ip", "netns", "exec", netns, *tag],
        workdir=work / "nodelocal-dns",
        extra_args=[f"--server={upstream}", *_CACHE_ARGS],
        ready_timeout=ready_timeout,
    )


def prepare(
    netns: str,
    app_mode: str,
    upstream: str,
    work: Path,
    ready_timeout: float,
    *,
    tag: Sequence[str] = (),
) -> tuple[Path, dict[str, Any] | None]:
    """The app's resolv.conf and, for the tuned app, the node-local cache it points at
    (started with the command prefix ``tag``: the sandbox's ``env TOKEN=...``)."""
    cache = None
    if app_mode == "tuned":
        server = _start_cache(netns, upstream, work, ready_timeout, tag)
        cache = {
            "pid": server.pid,
            "netns": netns,
            "address": NODELOCAL_ADDRESS,
            "port": server.port,
            "upstream": upstream,
        }
    path = work / "app-resolv.conf"
    path.write_text(resolv_conf(NODELOCAL_ADDRESS if cache else upstream))
    return path, cache
