"""`gameday sandbox up|down|status|run`: services in host network namespaces.

Both backends run every service natively in the sandbox's namespaces; the vm
backend adds the node VM on the app->database path (:mod:`chaos_ext._products.sandbox._node`),
booted in the background while the services start.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from chaos_ext._core import procfs as _procfs
from chaos_ext._products.sandbox import _netns, _node, _services, _vmhost
from chaos_ext._products.sandbox._state import SandboxState, load_state, save_state, state_dir
from chaos_ext._products.sandbox._topology import Topology, topology
from chaos_ext._products.sandbox.errors import SandboxError

__all__ = ["down", "run", "status", "up", "write_vars"]

Progress = Callable[[str], None]


def up(prefix: str, app_mode: str, say: Progress, backend: str = "netns") -> SandboxState:
    """Build the namespaces and start every service (and the node VM for ``vm``);
    on failure tear everything down."""
    topo = topology(prefix)
    if load_state(prefix) is not None or _netns.existing(topo):
        raise SandboxError(
            f"sandbox {prefix!r} is already up (or half up): "
            f"`gameday sandbox down --prefix {prefix}`"
        )
    work = state_dir(prefix)
    work.mkdir(parents=True, exist_ok=True)
    say(f"network: namespaces {', '.join(topo.namespaces)} on bridge {topo.subnet}")
    try:
        _netns.build(topo)
        if backend == "vm":
            say("node VM: booting in the background while the services start")
            _vmhost.start(prefix)
        state = _services.start_all(topo, app_mode, work, say, backend)
        save_state(state)
        if backend == "vm":
            node = _vmhost.wait_up(prefix, say)
            _node.route_through_node(topo)
            state.services["node"] = {
                "pid": node["qemu_pid"],
                "netns": "(micro-VM)",
                "address": topo.node_address,
                "port": node["ssh"]["port"],
                "accel": node["accel"],
            }
            say(f"node VM up ({node['accel']}, {node['boot_seconds']:g} s): app->db now crosses it")
            save_state(state)
        write_vars(topo, state, work, _vmhost.info(prefix).get("ssh"))
        _services.wait_healthy(topo.host("mon").netns, state.services["prometheus"]["url"], say)
    except BaseException:
        say("start failed: removing what was started")
        down(prefix, say)
        raise
    return state


def _latency_target(topo: Topology, ssh: dict[str, Any] | None) -> dict[str, Any]:
    """Where the DB latency fault goes: the app's own interface, or the node it crosses."""
    if ssh is None:
        return {"latency_target": f"netns:{topo.host('app').netns}", "latency_interface": "eth0"}
    return {
        "latency_target": f"ssh:{ssh['host']}:{ssh['port']}",
        "latency_interface": "eth1",
        "ssh_key_file": ssh["key_file"],
        "ssh_known_hosts": ssh["known_hosts"],
    }


def write_vars(
    topo: Topology, state: SandboxState, work: Path, ssh: dict[str, Any] | None = None
) -> Path:
    """``vars.json``: the configuration and secrets the sandbox experiments need."""
    app, db, dns = topo.host("app"), topo.host("db"), topo.host("dns")
    prom = state.services["prometheus"]
    data: dict[str, dict[str, Any]] = {
        "configuration": {
            "prometheus_url": prom["url"],
            "app_url": f"http://{app.address}:{_services.PORTS['app']}/",
            "app_readiness_url": f"http://{app.address}:{_services.PORTS['app']}/readiness",
            "app_netns": app.netns,
            "app_target": f"netns:{app.netns}",
            "app_interface": "eth0",
            "db_host": db.address,
            "db_port": _services.PORTS["postgres"],
            "db_name": "app",
            "db_user": "app",
            "db_cidr": f"{db.address}/32",
            "dns_server": dns.address,
            "dns_port": _services.PORTS["dns"],
            "dns_name": _services.DB_NAME,
            **_latency_target(topo, ssh),
            # 04-dns-rate-limit: the VPC resolver's limit scaled to the sandbox, and the
            # load on /search (6 DNS packets a request with ndots:5 for the fragile app)
            "search_url": f"http://{app.address}:{_services.PORTS['app']}/search",
            "dns_rate_pps": 50,
            "search_rate": 15.0,
        },
        "secrets": {"db": {"password": (work / "db-password").read_text()}},
    }
    path = work / "vars.json"
    path.write_text(json.dumps(data, indent=2))
    path.chmod(0o600)
    return path


def run(prefix: str, argv: Sequence[str], journal_dir: Path, timeout: float) -> int:
    """Run ``gameday <argv>`` inside the monitoring namespace with the sandbox's vars."""
    mon = topology(prefix).host("mon").netns
    vars_file = state_dir(prefix) / "vars.json"
    cli = [
        "ip",
        "netns",
        "exec",
        mon,
        sys.executable,
        "-m",
        "chaos_ext.cli.main",
        argv[0],
        "--var-file",
        str(vars_file),
        "--journal-dir",
        str(journal_dir),
        *argv[1:],
    ]
    return subprocess.run(cli, timeout=timeout, check=False).returncode


def down(prefix: str, say: Progress) -> dict[str, Any]:
    """Stop every service and remove every namespace and file. Safe to run twice."""
    topo = topology(prefix)
    state = load_state(prefix)
    if _vmhost.stop(prefix):
        say("node VM powered off")
    if state is not None:
        say(f"stopping {len(state.services)} services")
    stopped = _services.stop_all(prefix, state.dirs if state else [])
    removed = _netns.teardown(topo)
    work = state_dir(prefix)
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(work)
    if stopped or removed:
        say(f"stopped {stopped} process(es), removed namespaces {', '.join(removed) or 'none'}")
    else:
        say(f"sandbox {prefix!r} was not running")
    return {"stopped_processes": stopped, "removed_namespaces": removed}


def _probed_from(mon: str, svc: dict[str, Any]) -> str:
    """Where a service's answer is asked: the monitoring host for those on the bridge, the
    service's own namespace for one on its host's loopback (the tuned app's node-local DNS
    cache at 169.254.20.10 answers only the app's namespace)."""
    if ipaddress.ip_address(svc["address"]).is_link_local and svc.get("netns"):
        return str(svc["netns"])
    return mon


def status(prefix: str) -> dict[str, Any]:
    """What runs: namespaces, each service's pid and whether it answers."""
    topo: Topology = topology(prefix)
    state = load_state(prefix)
    namespaces = _netns.existing(topo)
    report: dict[str, Any] = {
        "prefix": prefix,
        "up": state is not None,
        "backend": state.backend if state else None,
        "app_mode": state.app_mode if state else None,
        "namespaces": namespaces,
        "services": {},
    }
    if state is None:
        return report
    mon = topo.host("mon").netns
    for name, svc in state.services.items():
        if "address" not in svc:
            running = _procfs.alive(int(svc["pid"]))
            report["services"][name] = {
                "pid": svc.get("pid"),
                "netns": svc.get("netns"),
                "running": running,
                "answering": None,
            }
            continue
        known: dict[str, Any] = {k: svc[k] for k in ("pid", "netns", "address", "port") if k in svc}
        report["services"][name] = {
            **known,
            "running": _procfs.alive(int(svc["pid"])),
            "answering": _services.reachable(
                _probed_from(mon, svc), svc["address"], int(svc["port"])
            ),
        }
    return report
