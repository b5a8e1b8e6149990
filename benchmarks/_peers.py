"""What the benchmarks compare against, and the package that provides each.

A benchmark calls :func:`require` before it starts anything: a missing tool
ends it with one line that names the Debian package (``make bench`` and
``scripts/install-system-deps.sh bench`` install them all), never a traceback.
"""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["PEERS", "require"]

PEERS: dict[str, str] = {
    "dnsperf": "dnsperf",
    "dnsmasq": "dnsmasq-base",
    "wrk": "wrk",
    "nginx": "nginx",
    "/usr/lib/postgresql/15/bin/pgbench": "postgresql-15 (pgbench; also in postgresql-client)",
    "/usr/lib/postgresql/15/bin/postgres": "postgresql-15",
    "kubectl": "kubernetes-client",
    "pandoc": "pandoc",
    "prometheus": "prometheus",
    "stress-ng": "stress-ng",
    "ip": "iproute2",
    "tc": "iproute2",
}
"""Tool (a command on PATH, or an absolute path) -> the Debian package that provides it."""


def _present(tool: str) -> bool:
    return Path(tool).is_file() if tool.startswith("/") else shutil.which(tool) is not None


def require(benchmark: str, *tools: str) -> None:
    """Stop ``benchmark`` with one line naming the packages of the missing ``tools``."""
    missing = [tool for tool in tools if not _present(tool)]
    if missing:
        what = ", ".join(f"{Path(t).name} (Debian package {PEERS[t]})" for t in missing)
        raise SystemExit(
            f"{benchmark}: not run: missing {what}; "
            "`make bench` or `scripts/install-system-deps.sh bench` installs it"
        )
