"""What is injected right now, read through each target's own interface (crash matrix).

``ss`` for TCP connections, ``pg_stat_activity``, dnsmasq's query log, the
HTTP server's request counter, the Kubernetes API; never the fault ledger.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import dns.exception
import dns.message
import dns.query
import dns.rcode

from chaos_ext._core.helper import all_helpers
from chaos_ext._core.targets.netns import run_in_netns
from chaos_ext._products.sandbox.servers import postgres
from chaos_ext._products.sandbox.servers.dnsmasq import Dnsmasq
from support.dns_checks import established
from support.dns_netlab import SERVER_IP, ResolverPair, netns_tables
from support.k8s_emulator import EmulatorHandle
from support.servers.http_target import HttpTarget

PASSWORD = "crash-matrix-password-0f3e"


def quiet_for(counter: Any, seconds: float = 1.0) -> bool:
    """Whether ``counter()`` does not move for ``seconds``."""
    before = counter()
    time.sleep(seconds)
    return bool(counter() == before)


def dns_hold_state(server: Dnsmasq) -> dict[str, Any]:
    return {"established": established(server.port)}


def dns_flood_state(server: Dnsmasq) -> dict[str, Any]:
    return {"queries_flowing": not quiet_for(lambda: sum(server.query_counts().values()))}


def pg_state(server: postgres.PostgresServer) -> dict[str, Any]:
    """The test role's client sessions, counted by the server (not by gameday's own label)."""
    with server.admin_connect() as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE usename = %s AND backend_type = 'client backend'",
            (server.user,),
        ).fetchone()
    return {"sessions": int(row[0]) if row else -1}


def web_state(server: HttpTarget) -> dict[str, Any]:
    flowing = not quiet_for(lambda: server.stats()["requests"])
    return {"requests_flowing": flowing, "established": established(server.port)}


def node_state(cluster: EmulatorHandle) -> dict[str, Any]:
    return {
        n["metadata"]["name"]: {
            "spec": n.get("spec") or {},
            "annotations": (n["metadata"].get("annotations") or {}),
        }
        for n in cluster.items("Node")
    }


def configmap_state(cluster: EmulatorHandle) -> dict[str, Any]:
    """The injector's data (hashed) and the template change's backup ConfigMaps (by name):
    a backup exists while the change is on, and the undo deletes it."""
    cm = cluster.get("ConfigMap", "istio-system", "istio-sidecar-injector") or {}
    data = json.dumps(cm.get("data"), sort_keys=True).encode()
    backups = [
        f"{c['metadata']['namespace']}/{c['metadata']['name']}"
        for c in cluster.items("ConfigMap")
        if (c["metadata"].get("labels") or {}).get("chaos-ext.gameday/backup")
    ]
    return {"sha256": hashlib.sha256(data).hexdigest(), "backups": sorted(backups)}


def nft_state(pair: ResolverPair) -> dict[str, Any]:
    """Our nftables tables in the client namespace, as ``nft list tables`` shows them."""
    return {"tables": netns_tables(pair.client_ns)}


def _proxies_in(ns: str) -> int:
    """DNS error proxies (helper processes) inside the namespace ``ns``, from /proc."""
    inode = os.stat(f"/run/netns/{ns}").st_ino
    found = 0
    for pids in all_helpers().values():
        for pid in pids:
            try:
                same = os.stat(f"/proc/{pid}/ns/net").st_ino == inode
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            found += same and b"chaos_ext.dns._dnserr_proxy" in cmdline
    return found


def dns_errors_state(pair: ResolverPair) -> dict[str, Any]:
    """What a lookup from the client namespace gets, our tables there, the proxies there."""

    def rcode() -> str:
        query = dns.message.make_query("www.example.test", "A")
        try:
            return dns.rcode.to_text(dns.query.udp(query, SERVER_IP, timeout=1.0).rcode())
        except dns.exception.Timeout:
            return "timeout"

    answer = run_in_netns(f"/run/netns/{pair.client_ns}", rcode, timeout=30)
    return {
        "rcode": answer,
        "tables": netns_tables(pair.client_ns),
        "proxies": _proxies_in(pair.client_ns),
    }
