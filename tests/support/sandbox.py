"""Run `gameday sandbox ...` for tests, with a given prefix and state folder; and read a
sandbox's targets (qdiscs, nftables, servers) with the system's own tools, not the product."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.harness import ROOT, netns_list


def sandbox_env(state: Path) -> dict[str, str]:
    """The environment of a CLI run against the sandbox whose ledger lives in ``state``."""
    return {
        **os.environ,
        "GAMEDAY_LEDGER": str(state / "ledger.sqlite3"),
        "COLUMNS": "200",
        "PYTHONPATH": str(ROOT),
    }


def sandbox_cli(
    prefix: str, state: Path, *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chaos_ext.cli.main", "sandbox", *args, "--prefix", prefix],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=sandbox_env(state),
        cwd=ROOT,
        check=False,
    )


def _out(*argv: str) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=True).stdout


def namespaces(prefix: str) -> list[str]:
    """The sandbox's network namespaces, as `ip netns list` names them."""
    return sorted(n for n in netns_list() if n.startswith(f"{prefix}-"))


def devices(ns: str) -> list[str]:
    return [link["ifname"] for link in json.loads(_out("ip", "-n", ns, "-j", "link", "show"))]


def _without_counters(text: str) -> str:
    """tc's JSON, byte for byte, but htb's ``direct_packets_stat``: a counter tc prints
    even without ``-s`` (packets sent before its classes existed), which moves by itself."""
    return re.sub(r',?"direct_packets_stat":\d+', "", text)


def targets(prefix: str) -> dict[str, str]:
    """Every qdisc, class and filter of every device and the whole nftables ruleset, of
    each namespace of the sandbox, as tc and nft print them (JSON, no statistics asked)."""
    found: dict[str, str] = {}
    for ns in namespaces(prefix):
        found[f"{ns} qdisc"] = _without_counters(_out("tc", "-j", "-n", ns, "qdisc", "show"))
        for dev in devices(ns):
            for what in ("class", "filter"):
                shown = _out("tc", "-j", "-n", ns, what, "show", "dev", dev)
                found[f"{ns} {what} {dev}"] = _without_counters(shown)
        found[f"{ns} nft"] = _out("ip", "netns", "exec", ns, "nft", "-j", "list", "ruleset")
    return found


def listener(prefix: str, port: int) -> tuple[str, str, str]:
    """(netns, device, IPv4 address) of the sandbox host with a TCP listener on ``port``:
    found by ss and ip in each namespace, not from the sandbox's own state."""
    for ns in namespaces(prefix):
        if not _out("ip", "netns", "exec", ns, "ss", "-Htln", f"sport = :{port}").strip():
            continue
        for link in json.loads(_out("ip", "-n", ns, "-j", "-4", "addr", "show")):
            for addr in link.get("addr_info", []):
                if addr.get("scope") == "global":
                    return ns, str(link["ifname"]), str(addr["local"])
    raise AssertionError(f"no namespace of sandbox {prefix} listens on TCP port {port}")


def state_of(prefix: str, state: Path) -> dict[str, Any]:
    """The sandbox's state.json (where its servers keep their files)."""
    loaded: dict[str, Any] = json.loads((state / "sandbox" / prefix / "state.json").read_text())
    return loaded
