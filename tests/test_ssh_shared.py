"""One SSH login per node for the plans before a run (``shared_connections``), against a real
OpenSSH server (Debian's sshd on this host's loopback, a free port).

Logins are counted with a spy on paramiko's ``SSHClient.connect`` (it calls the real one):
what is counted is the real handshakes made.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paramiko
import pytest
from support.servers import sshd

from chaos_ext._core.ssh import SshSession, SshSettings, shared_connections
from chaos_ext.cli.plan import plan_experiment

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not Path(sshd.SSHD).exists(), reason="openssh-server missing"),
]


@pytest.fixture
def node(tmp_path: Path) -> Iterator[sshd.SshdServer]:
    with sshd.start(workdir=tmp_path / "sshd") as server:
        yield server


@pytest.fixture
def logins(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    made: list[str] = []
    real = paramiko.SSHClient.connect

    def counted(self: paramiko.SSHClient, hostname: str, *args: Any, **kwargs: Any) -> None:
        made.append(f"{hostname}:{kwargs.get('port')}")
        real(self, hostname, *args, **kwargs)

    monkeypatch.setattr(paramiko.SSHClient, "connect", counted)
    return made


def _settings(server: sshd.SshdServer) -> SshSettings:
    return SshSettings(
        host=server.host,
        port=server.port,
        key_file=str(server.client_key),
        known_hosts=str(server.known_hosts),
    )


def test_sessions_share_one_login_inside_the_block_and_only_there(
    node: sshd.SshdServer, logins: list[str]
) -> None:
    settings = _settings(node)
    with shared_connections():
        for _ in range(3):
            with SshSession(settings) as session:
                assert session.run(["true"]).exit_code == 0
                assert session.host_key
    assert len(logins) == 1
    with SshSession(settings) as a, SshSession(settings) as b:  # outside: one login each
        assert a.run(["true"]).exit_code == 0 and b.run(["true"]).exit_code == 0
    assert len(logins) == 3


def test_a_session_pinning_a_host_key_always_makes_and_checks_its_own(
    node: sshd.SshdServer, logins: list[str]
) -> None:
    settings = _settings(node)
    with shared_connections():
        with SshSession(settings) as first:
            key = first.host_key
        with SshSession(settings, expect_host_key=key) as pinned:
            assert pinned.run(["true"]).exit_code == 0
        with SshSession(settings) as again:
            assert again.run(["true"]).exit_code == 0
    assert len(logins) == 2  # the pinned one logged in on its own


def test_the_plans_before_a_run_log_in_once_per_node(
    node: sshd.SshdServer, logins: list[str], tmp_path: Path
) -> None:
    """Two actions on one node: each plan's reachability check and preflight (4 logins
    before) share one login; the rows are the same plans as without sharing."""
    step = {
        "type": "action",
        "provider": {
            "type": "python",
            "module": "chaos_ext.dns.actions",
            "func": "inject_dns_errors",
            "secrets": ["node"],
            "arguments": {
                "patterns": ["a.test"],
                "error": "nxdomain",
                "target": f"ssh:{node.host}:{node.port}",
                "resolvers": ["192.0.2.53"],
            },
        },
    }
    experiment = {
        "title": "two plans on one node",
        "description": "-",
        "configuration": {"ssh_known_hosts": str(node.known_hosts)},
        "secrets": {"node": {"ssh_user": "root", "ssh_key_file": str(node.client_key)}},
        "method": [{**step, "name": "one"}, {**step, "name": "two"}],
    }
    rows = plan_experiment(json.loads(json.dumps(experiment)))
    assert len(rows) == 2 and len(logins) == 1, logins
    checks = [c["check"] for c in rows[0]["plan"]["preflight"]]
    assert "SSH reachable" in checks and all(c["ok"] for c in rows[0]["plan"]["preflight"])
    assert rows[0]["plan"]["preflight"] == rows[1]["plan"]["preflight"]
