"""Read-only facts about local processes from ``/proc``: the one place that parses it.

This boot's id, names, parents, states and start times (``/proc/<pid>/stat``), children,
environments (to find our helper processes), sockets, memory and
capabilities (``/proc/<pid>/status``). Used to find a server by pid, pidfile
or listening port, to count the children it forked, to tell a live fault
owner from a recycled pid, and to report a helper's resident memory. Socket
tables are read through ``/proc/<pid>/net/`` so a process in another network
namespace is seen in its own namespace. Nothing here changes anything.

Every other module reads ``/proc`` through these functions; the text parsers
(:func:`parse_stat`, :func:`effective_capabilities`) also serve text read on a
remote node over SSH.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CAP_NET_ADMIN",
    "CAP_SYS_ADMIN",
    "Process",
    "alive",
    "boot_id",
    "children",
    "cmdline",
    "effective_capabilities",
    "environ_values",
    "exists",
    "has_capability",
    "listening_tcp_inodes",
    "own_status",
    "parse_stat",
    "parse_tcp_table",
    "pids_with_environ",
    "process",
    "processes",
    "rss_kib",
    "socket_inodes",
    "start_time",
    "stat",
    "tree_size",
]

_PROC = Path("/proc")
_TCP_LISTEN = "0A"
CAP_NET_ADMIN = 12  # capability bit (linux/capability.h)
CAP_SYS_ADMIN = 21  # setns(2) into another network namespace needs it


@dataclass(frozen=True)
class Process:
    """One process: pid, parent pid, command name (``comm``), state letter, start time
    and process group.

    ``start_time`` is the kernel's start time in clock ticks since boot: with
    the pid it tells a process from a later one that reused its pid.
    """

    pid: int
    ppid: int
    comm: str
    state: str = "R"
    start_time: int = 0
    pgrp: int = 0

    @property
    def zombie(self) -> bool:
        return self.state in ("Z", "X")


def parse_stat(pid: int, text: str) -> Process:
    """Parse ``/proc/<pid>/stat`` text (``comm`` may hold spaces and parentheses)."""
    head, tail = text.rsplit(")", 1)
    comm = head.split("(", 1)[1]
    fields = tail.split()  # fields[0] is field 3 of proc(5): state
    return Process(
        pid=pid,
        ppid=int(fields[1]),
        comm=comm,
        state=fields[0],
        start_time=int(fields[19]),
        pgrp=int(fields[2]),
    )


def stat(pid: int) -> Process | None:
    """``/proc/<pid>/stat`` of ``pid``, zombies included (None if gone)."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return parse_stat(pid, text)


def process(pid: int) -> Process | None:
    """The live process ``pid`` (None if gone or a zombie)."""
    found = stat(pid)
    return None if found is None or found.zombie else found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has ended: it only waits to be reaped)."""
    return process(pid) is not None


def exists(pid: int) -> bool:
    """Whether ``/proc/<pid>`` exists (zombies included)."""
    return (_PROC / str(pid)).exists()


def start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` in clock ticks since boot, None if gone."""
    found = stat(pid)
    return None if found is None else found.start_time


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (every thread's ``task/*/children``); empty if gone."""
    found: list[int] = []
    for task in (_PROC / str(pid) / "task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def tree_size(pid: int) -> int:
    """Processes in the tree rooted at ``pid``, itself included (0 when it is gone)."""
    if not exists(pid):
        return 0
    todo, seen = [pid], set()
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo += children(current)
    return len(seen)


def pids_with_environ(entry: str) -> list[int]:
    """Pids of processes whose environment holds exactly ``entry`` (``NAME=value``).

    Only processes whose environment we may read (our own user's, or all as root).
    """
    needle = entry.encode()
    found = []
    for proc_dir in _PROC.iterdir():
        if not proc_dir.name.isdigit():
            continue
        try:
            environ = (proc_dir / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(proc_dir.name))
    return found


def environ_values(name: str) -> dict[int, str]:
    """``{pid: value}`` of the variable ``name`` in every process that has it (readable ones)."""
    prefix = f"{name}=".encode()
    found: dict[int, str] = {}
    for proc_dir in _PROC.iterdir():
        if not proc_dir.name.isdigit():
            continue
        try:
            environ = (proc_dir / "environ").read_bytes()
        except OSError:
            continue
        for item in environ.split(b"\0"):
            if item.startswith(prefix):
                found[int(proc_dir.name)] = item[len(prefix) :].decode(errors="replace")
                break
    return found


def cmdline(pid: int) -> list[str]:
    """The arguments of ``pid`` (empty if gone or a zombie)."""
    try:
        raw = (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [arg.decode(errors="replace") for arg in raw.split(b"\0") if arg]


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


def effective_capabilities(status_text: str) -> int:
    """The ``CapEff`` bit mask in ``/proc/<pid>/status`` text (0 if absent)."""
    for line in status_text.splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def own_status() -> str:
    """This process's ``/proc/self/status`` text (OSError if it cannot be read)."""
    return (_PROC / "self" / "status").read_text()


def has_capability(capability: int, status_text: str | None = None) -> bool:
    """Whether ``capability`` (a bit number) is effective: in ``status_text``, else for us."""
    if status_text is None:
        status_text = own_status()
    return bool(effective_capabilities(status_text) >> capability & 1)


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


def boot_id() -> str:
    """This boot's random id (``/proc/sys/kernel/random/boot_id``), "" if unreadable."""
    try:
        return (_PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
    except OSError:
        return ""
