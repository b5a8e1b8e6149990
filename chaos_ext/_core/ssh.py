"""SSH to nodes with paramiko: settings from Chaos Toolkit secrets, host keys checked.

Settings (secrets first, then configuration)::

    "secrets": {"node": {"ssh_user": "root", "ssh_key_file": "/keys/id_ed25519",
                         "ssh_key_passphrase": {"type": "env", "key": "KEY_PASS"}}}
    "configuration": {"ssh_known_hosts": "/keys/known_hosts",
                      "ssh_accept_unknown_host_key": false}

The host key must be in ``ssh_known_hosts`` (default ``~/.ssh/known_hosts``);
an unknown host is refused with a clear error unless
``ssh_accept_unknown_host_key`` is true (then it is accepted for this
connection only and never written anywhere). A changed key is always refused.

Commands are argument lists; each argument is checked (no NUL, no newline)
and quoted with :func:`shlex.join` for the remote POSIX shell. Every
connection, authentication and command has a timeout.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import hashlib
import io
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import paramiko

from chaos_ext.errors import InvalidArgument, TargetMismatch, TransportError

__all__ = ["CommandOutput", "SshSession", "SshSettings", "fingerprint", "shared_connections"]

#: Within :func:`shared_connections`: settings -> (connected client, its host key).
_SHARED: contextvars.ContextVar[dict[SshSettings, tuple[paramiko.SSHClient, str]] | None] = (
    contextvars.ContextVar("gameday_ssh_shared", default=None)
)


@contextlib.contextmanager
def shared_connections() -> Iterator[None]:
    """Within this block (in this thread), sessions with the same settings share one
    connection, closed when the block ends.

    For read-only work that opens several sessions to one host in a row: the plans
    before a run (each action's reachability check, then its preflight) would
    otherwise authenticate once per check. A session that pins a host key (an undo's
    reconnect) never shares: it always makes and checks its own connection.
    """
    pool: dict[SshSettings, tuple[paramiko.SSHClient, str]] = {}
    token = _SHARED.set(pool)
    try:
        yield
    finally:
        _SHARED.reset(token)
        for client, _ in pool.values():
            client.close()


@dataclass(frozen=True)
class SshSettings:
    """Where and how to connect. ``recipe()`` is what may be written down (no secrets)."""

    host: str
    port: int = 22
    user: str = "root"
    key_file: str | None = None
    key_text: str | None = field(default=None, repr=False)
    passphrase: str | None = field(default=None, repr=False)
    known_hosts: str = "~/.ssh/known_hosts"
    accept_unknown_host_key: bool = False
    connect_timeout: float = 10.0

    @classmethod
    def from_activity(
        cls,
        host: str,
        port: int,
        configuration: Mapping[str, Any] | None,
        secrets: Mapping[str, Any] | None,
    ) -> SshSettings:
        conf, sec = dict(configuration or {}), dict(secrets or {})

        def pick(name: str, default: Any = None) -> Any:
            return sec.get(name, conf.get(name, default))

        return cls(
            host=host,
            port=port,
            user=str(pick("ssh_user", "root")),
            key_file=pick("ssh_key_file"),
            key_text=sec.get("ssh_key"),
            passphrase=sec.get("ssh_key_passphrase"),
            known_hosts=str(pick("ssh_known_hosts", "~/.ssh/known_hosts")),
            accept_unknown_host_key=bool(pick("ssh_accept_unknown_host_key", False)),
        )

    def recipe(self) -> dict[str, Any]:
        """Connection details for the ledger: never the key or passphrase."""
        return {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "key_file": self.key_file,
            "known_hosts": self.known_hosts,
            "accept_unknown_host_key": self.accept_unknown_host_key,
        }

    @classmethod
    def from_recipe(cls, recipe: Mapping[str, Any]) -> SshSettings:
        return cls(**{k: recipe[k] for k in cls.__dataclass_fields__ if k in recipe})

    @property
    def where(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


@dataclass(frozen=True)
class CommandOutput:
    exit_code: int
    stdout: str
    stderr: str


def _quote(argv: Sequence[str]) -> str:
    for arg in argv:
        if not isinstance(arg, str) or "\0" in arg or "\n" in arg or "\r" in arg:
            raise InvalidArgument(f"remote command argument {arg!r} is not allowed")
    return shlex.join(argv)


class _AcceptForThisConnection(paramiko.MissingHostKeyPolicy):
    """The explicit opt-in: trust an unknown host key for this connection only."""

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)


def _reason(exc: OSError) -> str:
    """Why a connection failed: paramiko hides the errors of each address behind errno None."""
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        return "; ".join(
            f"{address[0]}: {getattr(error, 'strerror', None) or error}"
            for address, error in exc.errors.items()
        )
    return str(exc) or type(exc).__name__


def fingerprint(key: paramiko.PKey) -> str:
    """``<type> SHA256:<base64>``, as ``ssh-keygen -lf`` prints it."""
    digest = base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
    return f"{key.get_name()} SHA256:{digest}"


class SshSession:
    """One SSH connection (context manager).

    ``expect_host_key`` (a :func:`fingerprint`) pins the host: the fault
    ledger records the key seen when a fault was injected, and an undo that
    meets another key is refused (TargetMismatch) before any command runs,
    whatever ``known_hosts`` now says.
    """

    def __init__(self, settings: SshSettings, expect_host_key: str | None = None) -> None:
        self.settings = settings
        self.expect_host_key = expect_host_key
        self.host_key = ""
        self._client = paramiko.SSHClient()
        self._shared = False  # the client belongs to shared_connections(): not closed here

    def __enter__(self) -> SshSession:
        self.connect()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self._shared:
            self._client.close()

    def _pkey(self) -> paramiko.PKey | None:
        s = self.settings
        if s.key_text:
            try:
                return paramiko.PKey.from_private_key(io.StringIO(s.key_text), s.passphrase)
            except (paramiko.SSHException, ValueError) as exc:
                raise TransportError(f"ssh_key for {s.where} cannot be loaded: {exc}") from exc
        return None

    def connect(self) -> None:
        pool = _SHARED.get() if not self.expect_host_key else None
        if pool is not None and self.settings in pool:
            client, host_key = pool[self.settings]
            transport = client.get_transport()
            if transport is not None and transport.is_active():
                self._client, self.host_key, self._shared = client, host_key, True
                return
        self._connect()
        if pool is not None:
            pool[self.settings] = (self._client, self.host_key)
            self._shared = True

    def _connect(self) -> None:
        s = self.settings
        known = Path(s.known_hosts).expanduser()
        if known.exists():
            # into the checked set, without remembering the file (nothing is ever written back)
            self._client.get_host_keys().load(str(known))
        policy = (
            _AcceptForThisConnection() if s.accept_unknown_host_key else paramiko.RejectPolicy()
        )
        self._client.set_missing_host_key_policy(policy)
        try:
            self._client.connect(
                s.host,
                port=s.port,
                username=s.user,
                pkey=self._pkey(),
                key_filename=str(Path(s.key_file).expanduser()) if s.key_file else None,
                passphrase=s.passphrase,
                timeout=s.connect_timeout,
                banner_timeout=s.connect_timeout,
                auth_timeout=s.connect_timeout,
                allow_agent=False,
                look_for_keys=False,
            )
        except paramiko.BadHostKeyException as exc:
            raise TransportError(
                f"host key of {s.host}:{s.port} does not match {known}: refusing to connect"
            ) from exc
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):
                raise TransportError(
                    f"unknown SSH host {s.host}:{s.port}: its key is not in {known}; add it "
                    "(ssh-keyscan) or set ssh_accept_unknown_host_key: true to accept it"
                ) from exc
            raise TransportError(f"ssh {s.where}: {exc}") from exc
        except (TimeoutError, OSError) as exc:
            raise TransportError(f"ssh {s.where}: cannot connect: {_reason(exc)}") from exc
        self._pin()

    def _pin(self) -> None:
        transport = self._client.get_transport()
        if transport is None:
            raise TransportError(f"ssh {self.settings.where}: not connected")
        self.host_key = fingerprint(transport.get_remote_server_key())
        if self.expect_host_key and self.host_key != self.expect_host_key:
            self._client.close()
            raise TargetMismatch(
                f"ssh {self.settings.host}:{self.settings.port} presents host key"
                f" {self.host_key}, but the fault was made on the host with key"
                f" {self.expect_host_key}: another machine answers there; refusing to undo"
            )

    def run(
        self, argv: Sequence[str], timeout: float = 30.0, stdin: bytes | None = None
    ) -> CommandOutput:
        """Run one command (``stdin``: its input); TransportError if it cannot run or
        exceeds ``timeout``."""
        command = _quote(argv)
        transport = self._client.get_transport()
        if transport is None:
            raise TransportError(f"ssh {self.settings.where}: not connected")
        try:
            chan = transport.open_session(timeout=timeout)
            # blocking reads with an idle timeout: no polling loop competing with
            # paramiko's transport thread for the GIL
            chan.settimeout(timeout)
            chan.exec_command(command)
            if stdin is not None:
                chan.sendall(stdin)
                chan.shutdown_write()
            with chan.makefile("rb") as stdout, chan.makefile_stderr("rb") as stderr:
                out, err = stdout.read(), stderr.read()
            code = chan.recv_exit_status()
            chan.close()
        except TimeoutError as exc:
            raise TransportError(f"ssh {self.settings.where}: {argv[0]} timed out") from exc
        except (paramiko.SSHException, OSError) as exc:
            raise TransportError(f"ssh {self.settings.where}: {argv[0]}: {exc}") from exc
        return CommandOutput(code, out.decode(errors="replace"), err.decode(errors="replace"))

    def check(self, argv: Sequence[str], timeout: float = 30.0, stdin: bytes | None = None) -> str:
        """Run a command that must succeed; returns its stdout."""
        result = self.run(argv, timeout, stdin)
        if result.exit_code != 0:
            raise TransportError(
                f"ssh {self.settings.where}: {shlex.join(argv)} exited {result.exit_code}: "
                f"{result.stderr.strip()[:300]}"
            )
        return result.stdout
