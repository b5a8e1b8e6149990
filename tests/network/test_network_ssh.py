"""The SSH target against a real OpenSSH server in a network namespace made by the test.

This host's kernel has no netem, so a real remote preflight must refuse clearly;
host keys are checked; remote commands are argument lists quoted for a real shell.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyroute2 import netns
from support.harness import cli_env, gameday_argv
from support.netlab import kernel_has_netem, sh
from support.servers import sshd

from chaos_ext._core.ledger import Ledger
from chaos_ext._core.ssh import SshSession, SshSettings
from chaos_ext.errors import PreflightFailed, TransportError
from chaos_ext.network import actions, probes

pytestmark = pytest.mark.skipif(
    shutil.which("sshd") is None and not Path(sshd.SSHD).exists(), reason="openssh-server missing"
)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[str, sshd.SshdServer]]:
    """A 'node': sshd in its own namespace, with a veth pair to put faults on."""
    ns = f"gds-{uuid.uuid4().hex[:8]}"
    sh("ip", "netns", "add", ns)
    try:
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "link", "add", "va", "type", "veth", "peer", "name", "vb")
        with sshd.start(workdir=tmp_path / "sshd", netns_prefix=["ip", "netns", "exec", ns]) as s:
            yield ns, s
    finally:
        sh("ip", "netns", "delete", ns, check=False)


@contextlib.contextmanager
def inside(ns: str) -> Iterator[None]:
    """Run this thread's new sockets in ``ns`` (where the node's sshd listens)."""
    netns.pushns(ns)
    try:
        yield
    finally:
        netns.popns()


def _conf(server: sshd.SshdServer, **extra: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    configuration = {"ssh_known_hosts": str(server.known_hosts), **extra}
    secrets = {"ssh_user": "root", "ssh_key_file": str(server.client_key)}
    return configuration, secrets


def test_arguments_reach_the_remote_shell_quoted(node: tuple[str, sshd.SshdServer]) -> None:
    ns, server = node
    conf, sec = _conf(server)
    with (
        inside(ns),
        SshSession(SshSettings.from_activity(server.host, server.port, conf, sec)) as s,
    ):
        assert s.check(["echo", "a b; touch /tmp/x", "$(id)"]) == "a b; touch /tmp/x $(id)\n"
        assert s.run(["sh", "-c", "exit 3"]).exit_code == 3
        assert s.check(["ip", "-o", "link", "show", "va"]).split(":")[1].strip().startswith("va")


def test_unknown_host_key_is_refused_unless_accepted(
    node: tuple[str, sshd.SshdServer], tmp_path: Path
) -> None:
    ns, server = node
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    conf, sec = _conf(server)
    conf["ssh_known_hosts"] = str(empty)
    with inside(ns), pytest.raises(TransportError, match=r"unknown SSH host 127\.0\.0\.1"):
        probes.qdisc_state(
            "va", target=f"ssh:{server.host}:{server.port}", configuration=conf, secrets=sec
        )
    conf["ssh_accept_unknown_host_key"] = True
    with inside(ns):
        state = probes.qdisc_state(
            "va", target=f"ssh:{server.host}:{server.port}", configuration=conf, secrets=sec
        )
    assert state["latency_active"] is False and state["default_root"] is True
    assert empty.read_text() == ""  # accepted for this connection only


def test_changed_host_key_is_refused(node: tuple[str, sshd.SshdServer], tmp_path: Path) -> None:
    ns, server = node
    other = tmp_path / "other_key"
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other))
    wrong = tmp_path / "wrong_known_hosts"
    pub = other.with_suffix(".pub").read_text().split()[:2]
    wrong.write_text(f"[{server.host}]:{server.port} {' '.join(pub)}\n")
    conf, sec = _conf(server, ssh_accept_unknown_host_key=True)  # even with the opt-in
    conf["ssh_known_hosts"] = str(wrong)
    with inside(ns), pytest.raises(TransportError, match="does not match"):
        probes.qdisc_state(
            "va", target=f"ssh:{server.host}:{server.port}", configuration=conf, secrets=sec
        )


@pytest.mark.skipif(kernel_has_netem(), reason="this kernel has netem")
def test_remote_preflight_reports_the_missing_netem_and_changes_nothing(
    node: tuple[str, sshd.SshdServer], ledger_path: Path
) -> None:
    ns, server = node
    conf, sec = _conf(server)
    before = sh("tc", "-n", ns, "qdisc", "show", "dev", "va").stdout
    namespaces_before = set(sh("ip", "netns", "list").stdout.split())
    target = f"ssh:{server.host}:{server.port}"
    with inside(ns), pytest.raises(PreflightFailed, match=rf"kernel \S+ on {target} has no "):
        actions.add_latency(
            "va", 0.15, ["10.2.0.0/24"], target=target, configuration=conf, secrets=sec
        )
    with inside(ns), pytest.raises(PreflightFailed, match="sch_netem"):
        probes.latency_supported("va", target=target, configuration=conf, secrets=sec)
    assert sh("tc", "-n", ns, "qdisc", "show", "dev", "va").stdout == before
    assert Ledger(ledger_path).history() == []
    # the scratch namespace of the remote probe was removed again
    assert set(sh("ip", "netns", "list").stdout.split()) <= namespaces_before | {"(id:"}


def test_an_undo_meeting_another_host_key_is_refused(tmp_path: Path, ledger_path: Path) -> None:
    """Issue 22, point 1: the ledger pins the node by the host key seen at injection.

    Node A is replaced at the same address by node B, and known_hosts was updated
    for B: SSH alone would connect. The undo of A's fault must refuse, naming both
    keys; an entry recorded on B is undone normally.
    """
    from chaos_ext.network._remote import RemoteTc  # noqa: PLC0415

    ns = f"gds-{uuid.uuid4().hex[:8]}"
    sh("ip", "netns", "add", ns)
    try:
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "link", "add", "va", "type", "veth", "peer", "name", "vb")
        prefix = ["ip", "netns", "exec", ns]
        keys = {}
        with sshd.start(workdir=tmp_path / "a", netns_prefix=prefix) as a:
            port = a.port
            conf, sec = _conf(a)
            with inside(ns), SshSession(SshSettings.from_activity(a.host, a.port, conf, sec)) as s:
                keys["a"] = s.host_key
                snapshot = RemoteTc(s, "a").snapshot("va")
        with sshd.start(workdir=tmp_path / "b", netns_prefix=prefix, port=port) as b:
            conf, sec = _conf(b)
            settings = SshSettings.from_activity(b.host, b.port, conf, sec)
            with inside(ns), SshSession(settings) as s:
                keys["b"] = s.host_key
            assert keys["a"] != keys["b"] and keys["b"].startswith("ssh-ed25519 SHA256:")
            book = Ledger(ledger_path)

            def record(host_key: str) -> str:
                connection = {"ssh": {**settings.recipe(), "host_key": host_key}}
                entry = book.record(
                    kind="netem",
                    target=f"ssh:{b.host}:{port}/va",
                    recipe={
                        "target": f"ssh:{b.host}:{port}",
                        "interface": "va",
                        "spec": {},
                        "snapshot": snapshot,
                        "connection": connection,
                    },
                    module="chaos_ext.network.actions",
                    identity={
                        "scope": "ssh",
                        "ssh": {"host": b.host, "port": port, "host_key": host_key},
                    },
                )
                return entry.id

            def rollback() -> subprocess.CompletedProcess[str]:
                return subprocess.run(
                    [*prefix, *gameday_argv("rollback")],
                    env=cli_env(ledger_path),
                    capture_output=True,
                    text=True,
                    timeout=120,
                    check=False,
                )

            record(keys["b"])
            fine = rollback()
            assert fine.returncode == 0, fine.stderr
            assert "qdisc tree already as before" in fine.stderr
            stale = record(keys["a"])
            refused = rollback()
            assert refused.returncode == 2, refused.stderr
            text = " ".join(refused.stderr.split())
            assert "TargetMismatch" in text and keys["a"] in text and keys["b"] in text
            assert [e.id for e in book.open_entries()] == [stale]
    finally:
        sh("ip", "netns", "delete", ns, check=False)
