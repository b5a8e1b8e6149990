"""Read-only facts about local processes from ``/proc``: names, parents, sockets, memory.

Used to find a server by pid, pidfile or listening port, to count the
children it forked, and to report a helper's resident memory. Socket tables
are read through ``/proc/<pid>/net/`` so a process in another network
namespace is seen in its own namespace. Nothing here changes anything.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Process",
    "listening_tcp_inodes",
    "parse_tcp_table",
    "process",
    "processes",
    "rss_kib",
    "socket_inodes",
]

_PROC = Path("/proc")
_TCP_LISTEN = "0A"


@dataclass(frozen=True)
class Process:
    """One process: pid, parent pid and command name (``comm``)."""

    pid: int
    ppid: int
    comm: str


def _parse_stat(pid: int, text: str) -> Process:
    # "pid (comm) state ppid ..."; comm may hold spaces and parentheses.
    head, tail = text.rsplit(")", 1)
    comm = head.split("(", 1)[1]
    return Process(pid=pid, ppid=int(tail.split()[1]), comm=comm)


def process(pid: int) -> Process | None:
    """The live process ``pid`` (None if gone or a zombie)."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    if text.rsplit(")", 1)[1].split()[0] == "Z":
        return None
    return _parse_stat(pid, text)


def processes(comm: str | None = None) -> Iterator[Process]:
    """Every live process, or only those whose command name is ``comm``."""
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        found = process(int(entry.name))
        if found is not None and (comm is None or found.comm == comm):
            yield found


def socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets ``pid`` has open (empty if it is gone)."""
    inodes: set[int] = set()
    fd_dir = _PROC / str(pid) / "fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return inodes
    for name in names:
        try:
            target = os.readlink(fd_dir / name)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def parse_tcp_table(text: str, port: int) -> set[int]:
    """Inodes of LISTEN sockets on ``port`` in a ``/proc/net/tcp{,6}`` table."""
    inodes: set[int] = set()
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != _TCP_LISTEN:
            continue
        local_port = int(fields[1].rsplit(":", 1)[1], 16)
        if local_port == port:
            inodes.add(int(fields[9]))
    return inodes


def listening_tcp_inodes(pid: int, port: int) -> set[int]:
    """LISTEN socket inodes on ``port`` in the network namespace of ``pid``."""
    inodes: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            text = (_PROC / str(pid) / "net" / table).read_text()
        except OSError:
            continue
        inodes |= parse_tcp_table(text, port)
    return inodes


def rss_kib(pid: int) -> int | None:
    """Resident set size of ``pid`` in KiB (VmRSS), None if gone."""
    try:
        text = (_PROC / str(pid) / "status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None
