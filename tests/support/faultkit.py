"""A test Chaos Toolkit extension whose faults are real and observable.

It uses only chaos_ext's public ledger and helper API, as a third-party
extension would: a network namespace (kernel object) and a listening TCP
socket held by a helper process.
"""

from __future__ import annotations

import socket
import subprocess
import time

from chaos_ext._core import helper as _helper
from chaos_ext._core.ledger import Entry, default_ledger, fault, undo_handler
from chaos_ext.errors import ChaosExtError

__all__ = [
    "create_netns",
    "fail",
    "hold_port",
    "nap",
    "netns_exists",
    "port_open",
    "remove_netns",
]


def _netns_list() -> set[str]:
    out = subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, check=True, timeout=10
    ).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def create_netns(name: str) -> dict[str, str]:
    """Create a network namespace (recorded in the ledger first)."""
    with fault(kind="test-netns", target=name, recipe={"name": name}, module=__name__):
        subprocess.run(["ip", "netns", "add", name], check=True, timeout=10)
    return {"created": name}


@undo_handler("test-netns")
def _undo_netns(entry: Entry) -> str:
    name = entry.recipe["name"]
    if name not in _netns_list():
        return f"namespace {name} already gone"
    subprocess.run(["ip", "netns", "delete", name], check=True, timeout=10)
    return f"namespace {name} deleted"


def remove_netns(name: str) -> bool:
    """Delete a namespace (an experiment's own rollback)."""
    if name in _netns_list():
        subprocess.run(["ip", "netns", "delete", name], check=True, timeout=10)
        return True
    return False


def netns_exists(name: str) -> bool:
    """Whether the namespace exists."""
    return name in _netns_list()


def hold_port(port: int, seconds: float = 120) -> dict[str, int]:
    """Listen on 127.0.0.1:port from a helper process (recorded in the ledger first)."""
    with fault(kind="test-port", target=f"127.0.0.1:{port}", recipe={}, module=__name__) as e:
        handle = _helper.start_helper(
            module="support.port_holder",
            payload={"port": port, "seconds": seconds},
            token=e.id,
            ready_timeout=10,
        )
        default_ledger().update_recipe(e.id, {"pid": handle.pid})
    return {"port": port, "pid": handle.pid}


@undo_handler("test-port")
def _undo_port(entry: Entry) -> str:
    return f"stopped {_helper.stop_helpers(entry.id)} helper(s)"


def port_open(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:port."""
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def nap(seconds: float) -> float:
    """Sleep inside a Python activity (signals then land inside an activity)."""
    time.sleep(seconds)
    return seconds


def fail(message: str = "boom") -> None:
    """An action that always fails."""
    raise ChaosExtError(message)
