"""What one ``gameday`` command passes down to the code it runs, as one object.

The command line builds a :class:`Settings` from its options (``--ledger``,
``--kubeconfig``, ``--context``, ``--db-dsn``) and installs it for the command
with :func:`use_settings`; the code that needs a setting reads
:func:`current_settings` and, where a field is None, falls back to the
environment variable a user sets (``$GAMEDAY_LEDGER``, ``$KUBECONFIG``,
``$GAMEDAY_SCAN_DSN``), so plain ``chaos run`` and embedding code work as
before. Nothing is written to ``os.environ``: a child process that needs a
setting (a fault's watchdog) gets it in the environment built for that child.

Installed for the process, not in a :class:`contextvars.ContextVar`:
chaostoolkit-lib runs activities, rollbacks and timers in worker threads,
which do not inherit a context variable, and all of them must see the
command's ledger. :func:`use_settings` restores what was installed before
when its block ends, so tests and nested commands stay independent.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Settings", "current_settings", "use_settings"]


@dataclass(frozen=True)
class Settings:
    """The settings of one command; None everywhere means "as the environment says".

    ``ledger``: the fault ledger file (``gameday --ledger``; else ``$GAMEDAY_LEDGER``,
    else the default under ``$XDG_STATE_HOME``).

    ``kubeconfig``: the kubeconfig the command's Kubernetes clients use
    (``--kubeconfig``; else ``$KUBECONFIG``, else ``~/.kube/config``). Set, it
    also means the operator named the cluster: an entry recorded without a
    cluster identity may then be undone with it.

    ``context``: the kubeconfig context (``--context`` of run, plan, rollback,
    ledger). Kubernetes clients use it unless an activity's secrets name
    ``KUBERNETES_CONTEXT``; else ``$KUBERNETES_CONTEXT``, else the kubeconfig's
    current one. An undo uses it, else the context recorded with the fault if
    the kubeconfig has it.

    ``db_dsn``: the PostgreSQL server scanned for gameday's sessions and
    reconnected to when undoing an orphan hold (``--db-dsn``; else
    ``$GAMEDAY_SCAN_DSN``). It may hold a password: never in a repr, a log, a
    journal or a child's environment.
    """

    ledger: Path | None = None
    kubeconfig: str | None = None
    context: str | None = None
    db_dsn: str | None = field(default=None, repr=False)


_lock = threading.Lock()
_installed = Settings()


def current_settings() -> Settings:
    """The settings installed by :func:`use_settings` (all None outside a command)."""
    with _lock:
        return _installed


@contextmanager
def use_settings(settings: Settings) -> Iterator[Settings]:
    """Install ``settings`` for the ``with`` block; what was installed before comes back after."""
    global _installed  # noqa: PLW0603 - one command per process, read from activity threads
    with _lock:
        previous, _installed = _installed, settings
    try:
        yield settings
    finally:
        with _lock:
            _installed = previous
