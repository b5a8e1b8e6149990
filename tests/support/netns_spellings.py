"""One network namespace the test creates, reachable by three spellings.

::

    with spelled_namespace() as ns:
        ns.spell("name")   # netns:gdt-1a2b3c4d
        ns.spell("alias")  # netns:gdt-1a2b3c4d-a (``ip netns attach``: a second name)
        ns.spell("pid")    # pid:4242 (a ``sleep`` running inside it)

Everything is removed afterwards (the process, both names, the namespace);
a name left behind fails loudly.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from support.harness import netns_list, wait_for

__all__ = ["SPELLINGS", "Spelled", "spelled_namespace"]

SPELLINGS = ("name", "pid", "alias")


def _inode(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=check)


@dataclass(frozen=True)
class Spelled:
    name: str
    alias: str
    pid: int

    def spell(self, how: str) -> str:
        return {
            "name": f"netns:{self.name}",
            "alias": f"netns:{self.alias}",
            "pid": f"pid:{self.pid}",
        }[how]


@contextlib.contextmanager
def spelled_namespace() -> Iterator[Spelled]:
    name = f"gdt-{uuid.uuid4().hex[:8]}"
    alias = f"{name}-a"
    _sh("ip", "netns", "add", name)
    try:
        inside = subprocess.Popen(["ip", "netns", "exec", name, "sleep", "600"])
        try:
            # until ``ip`` has entered the namespace (and become sleep), its pid is in the
            # host's: never name that
            wait_for(
                lambda: _inode(f"/proc/{inside.pid}/ns/net") == _inode(f"/run/netns/{name}"),
                10,
                f"pid {inside.pid} to enter {name}",
            )
            _sh("ip", "netns", "attach", alias, str(inside.pid))
            assert _inode(f"/run/netns/{alias}") == _inode(f"/run/netns/{name}")
            yield Spelled(name, alias, inside.pid)
        finally:
            inside.kill()
            inside.wait(timeout=10)
    finally:
        _sh("ip", "netns", "delete", alias, check=False)
        _sh("ip", "netns", "delete", name, check=False)
    left = {name, alias} & netns_list()
    assert not left, f"namespaces left behind: {left}"
