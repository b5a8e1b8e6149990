"""A throwaway Debian dnsmasq: own port, own directory, loopback or a network namespace.

::

    with dnsmasq.start(records={"db.example.test": "10.0.0.5"},
                       local_domains=["example.test"], log_queries=True) as server:
        ...  # server.address, server.port, server.pid
        server.query_counts()  # {("A", "db.example.test"): 1, ...}

It runs ``dnsmasq -k --no-resolv --no-hosts --bind-interfaces`` with
``--conf-file=/dev/null`` (nothing from the host's configuration), answers
``records`` (``--host-record``), answers NXDOMAIN for unknown names under
``local_domains`` (``--local=/d/``) and REFUSED for anything else (no upstream).
With ``log_queries`` every query is written to ``<workdir>/queries.log``
(``--log-queries --log-facility=FILE``) so tests count queries server-side.

In a network namespace pass ``prefix=["ip", "netns", "exec", ns]`` and an
address that exists there (bring ``lo`` up first); readiness is then read from
``/proc/<pid>/net`` because the host cannot reach the namespace.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from chaos_ext._core import procfs as _procfs
from chaos_ext._products.sandbox.servers._stoppable import Stoppable

__all__ = ["Dnsmasq", "free_port", "start"]

_QUERY_LINE = re.compile(r"dnsmasq\[\d+\]: query\[(?P<qtype>[A-Z0-9]+)\] (?P<name>\S+) from ")


@dataclass
class Dnsmasq(Stoppable):
    """A running dnsmasq started by :func:`start`."""

    address: str
    port: int
    pid: int
    workdir: Path
    pidfile: Path
    log_file: Path | None
    _proc: subprocess.Popen[bytes] = field(repr=False)
    _own_workdir: bool = field(default=False, repr=False)

    def children(self) -> list[int]:
        """Pids of the dnsmasq processes this server forked (one per TCP connection)."""
        return [p.pid for p in _procfs.processes("dnsmasq") if p.ppid == self.pid]

    def query_counts(self) -> Counter[tuple[str, str]]:
        """``(qtype, name) -> count`` of queries logged so far (needs ``log_queries``)."""
        if self.log_file is None:
            raise RuntimeError("dnsmasq was started without log_queries")
        counts: Counter[tuple[str, str]] = Counter()
        with contextlib.suppress(FileNotFoundError):
            for match in _QUERY_LINE.finditer(self.log_file.read_text(errors="replace")):
                counts[(match["qtype"], match["name"])] += 1
        return counts

    def stop(self) -> None:
        """Stop dnsmasq and its TCP children; idempotent."""
        children = self.children() if self._proc.poll() is None else []
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=5)
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def free_port(address: str = "127.0.0.1") -> int:
    """A port free for both UDP and TCP on ``address`` right now (host namespace)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    for _ in range(50):
        with socket.socket(family, socket.SOCK_STREAM) as tcp:
            tcp.bind((address, 0))
            port = int(tcp.getsockname()[1])
            with socket.socket(family, socket.SOCK_DGRAM) as udp:
                try:
                    udp.bind((address, port))
                except OSError:
                    continue
                return port
    raise RuntimeError(f"no free UDP+TCP port on {address}")


def _argv(
    address: str,
    port: int,
    workdir: Path,
    records: Mapping[str, str],
    local_domains: Sequence[str],
    log_file: Path | None,
    extra_args: Sequence[str],
) -> list[str]:
    argv = [
        "dnsmasq",
        "-k",
        "--conf-file=/dev/null",
        "--no-resolv",
        "--no-hosts",
        "--bind-interfaces",
        f"--listen-address={address}",
        f"--port={port}",
        f"--pid-file={workdir / 'dnsmasq.pid'}",
    ]
    argv += [f"--host-record={name},{ip}" for name, ip in records.items()]
    argv += [f"--local=/{domain}/" for domain in local_domains]
    if log_file is not None:
        argv += ["--log-queries", f"--log-facility={log_file}"]
    return [*argv, *extra_args]


def start(
    *,
    records: Mapping[str, str] | None = None,
    local_domains: Sequence[str] = (),
    address: str = "127.0.0.1",
    port: int | None = None,
    prefix: Sequence[str] = (),
    log_queries: bool = False,
    workdir: Path | None = None,
    extra_args: Sequence[str] = (),
    ready_timeout: float = 10.0,
) -> Dnsmasq:
    """Start dnsmasq and wait until it listens on UDP and TCP ``port``.

    ``port`` None picks a free one (retrying if another process takes it
    first). Raises RuntimeError with dnsmasq's own message if it does not start.
    """
    own = workdir is None
    directory = Path(tempfile.mkdtemp(prefix="gameday-dnsmasq-")) if workdir is None else workdir
    directory.mkdir(parents=True, exist_ok=True)
    log_file = directory / "queries.log" if log_queries else None
    last_error = ""
    for _ in range(1 if port is not None else 5):
        chosen = port if port is not None else free_port(address if not prefix else "127.0.0.1")
        argv = [
            *prefix,
            *_argv(address, chosen, directory, records or {}, local_domains, log_file, extra_args),
        ]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _wait_listening(proc, chosen, ready_timeout)
        except RuntimeError as exc:
            last_error = str(exc)
            continue
        if proc.stderr is not None:
            proc.stderr.close()
        return Dnsmasq(
            address, chosen, proc.pid, directory, directory / "dnsmasq.pid", log_file, proc, own
        )
    if own:
        shutil.rmtree(directory, ignore_errors=True)
    raise RuntimeError(f"dnsmasq did not start: {last_error}")


def _wait_listening(proc: subprocess.Popen[bytes], port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            message = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"exit {proc.returncode}: {message.strip()}")
        if _procfs.listening_tcp_inodes(proc.pid, port) & _procfs.socket_inodes(proc.pid):
            return
        time.sleep(0.02)
    proc.kill()
    proc.wait(timeout=5)
    raise RuntimeError(f"not listening on port {port} within {timeout:.0f} s")
