"""The permission checks of the network and DNS plans: CAP_NET_ADMIN here, SSH reachability.

CAP_NET_ADMIN: ``gameday plan`` runs with the capability dropped from its
bounding set (``capsh --drop``, from libcap, else ``setpriv`` from util-linux),
so its effective set lacks it for real. SSH: a real OpenSSH server
(:mod:`support.servers.sshd`) on loopback, or in a namespace the test makes
for the plan that then reads a qdisc tree; and a closed port.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyroute2 import netns
from support.harness import cli_env, gameday_argv
from support.k8s_authorizer import AllowRule
from support.k8s_emulator import EmulatorHandle, emulator  # noqa: F401 - the fixture
from support.netlab import VethNs, sh
from support.servers import sshd

from chaos_ext._core.targets.access import net_admin_here, target_checks
from chaos_ext._core.targets.spec import parse_target
from chaos_ext.network.plan import plan_add_latency

needs_sshd = pytest.mark.skipif(
    shutil.which("sshd") is None and not Path(sshd.SSHD).exists(), reason="openssh-server missing"
)


def _without_net_admin(argv: list[str]) -> list[str]:
    """``argv`` run with CAP_NET_ADMIN dropped from the bounding set (so from the effective)."""
    if shutil.which("capsh"):
        return ["capsh", "--drop=cap_net_admin", "--", "-c", 'exec "$0" "$@"', *argv]
    if shutil.which("setpriv"):
        return ["setpriv", "--inh-caps=-net_admin", "--bounding-set=-net_admin", *argv]
    pytest.skip("neither capsh nor setpriv to drop a capability")


def _experiment(*actions: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "title": "permissions",
        "description": "x",
        "method": [
            {
                "type": "action",
                "name": f"{func}-{number}",
                "provider": {"type": "python", "module": module, "func": func, "arguments": args},
            }
            for number, (module, func, args) in enumerate(actions)
        ],
    }


def _plan(
    tmp_path: Path, ledger: Path, experiment: dict[str, Any], wrap: Callable[[list[str]], list[str]]
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    (tmp_path / "x.json").write_text(json.dumps(experiment))
    argv = wrap(gameday_argv("plan", "x.json", "--json", "plan.json"))
    result = subprocess.run(
        argv,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env(ledger),
        cwd=tmp_path,
    )
    (planned,) = json.loads((tmp_path / "plan.json").read_text())["plans"]
    return result, planned["actions"]


def _checks(row: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["check"]: c for c in row["plan"]["preflight"]}


def test_this_process_has_cap_net_admin_and_says_so() -> None:
    check = net_admin_here("netns:x")
    assert check["ok"], check
    assert check["check"] == "CAP_NET_ADMIN" and "has it" in check["detail"]


def test_gameday_plan_without_cap_net_admin_fails_and_names_it(
    veth_ns: VethNs, ledger_path: Path, tmp_path: Path
) -> None:
    latency = {
        "interface": veth_ns.dev,
        "delay_seconds": 0.1,
        "destinations": ["192.0.2.0/24"],
        "target": f"netns:{veth_ns.ns}",
    }
    experiment = _experiment(
        ("chaos_ext.network.actions", "add_latency", latency),
        ("chaos_ext.dns.actions", "limit_dns_rate", {"pps": 100, "target": f"netns:{veth_ns.ns}"}),
    )
    result, rows = _plan(tmp_path, ledger_path, experiment, _without_net_admin)

    out = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 3, out  # a missing privilege: refused, as a run refuses
    assert "✗ CAP_NET_ADMIN: this process" in out
    assert out.count("; nothing injected") == 2, out  # one refusal line per action
    for row in rows:
        assert row["status"] == "refused", row
        check = _checks(row)["CAP_NET_ADMIN"]
        assert not check["ok"], row
        assert "lacks CAP_NET_ADMIN in its effective set" in check["detail"]
        assert "bit 12 clear" in check["detail"] and f"netns:{veth_ns.ns}" in check["detail"]
    assert sh("tc", "-n", veth_ns.ns, "qdisc", "show", "dev", veth_ns.dev).stdout.count("\n") <= 1
    assert sh("ip", "netns", "exec", veth_ns.ns, "nft", "list", "ruleset").stdout == ""
    assert not ledger_path.exists()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when this returns: nothing listens


def test_gameday_plan_names_an_unreachable_ssh_target(ledger_path: Path, tmp_path: Path) -> None:
    port = _closed_port()
    target = f"ssh:127.0.0.1:{port}"
    experiment = _experiment(
        ("chaos_ext.dns.actions", "limit_dns_rate", {"pps": 100, "target": target}),
        (
            "chaos_ext.network.actions",
            "add_latency",
            {"interface": "eth0", "delay_seconds": 0.1, "destinations": ["192.0.2.0/24"]}
            | {"target": target},
        ),
    )
    result, rows = _plan(tmp_path, ledger_path, experiment, lambda argv: argv)

    out = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 1, out
    assert f"✗ SSH reachable: unreachable: ssh root@127.0.0.1:{port}: cannot connect" in out
    for row in rows:
        checks = _checks(row)
        assert list(checks) == ["SSH reachable"], checks  # nothing else tried
        assert "Connection refused" in checks["SSH reachable"]["detail"]
    assert "the target cannot be reached" in rows[1]["plan"]["would"]
    assert not ledger_path.exists()


def _conf(server: sshd.SshdServer, key: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    return {"ssh_known_hosts": str(server.known_hosts)}, {"ssh_key_file": str(key)}


@needs_sshd
def test_a_reachable_ssh_target_runs_true_and_reports_the_users_capability(
    tmp_path: Path,
) -> None:
    with sshd.start(workdir=tmp_path / "sshd") as server:
        where = parse_target(f"ssh:{server.host}:{server.port}")
        reached, capability = target_checks(where, *_conf(server, server.client_key))
        stranger = tmp_path / "stranger_key"
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger))
        (refused,) = target_checks(where, *_conf(server, stranger))
    assert reached["check"] == "SSH reachable" and reached["ok"], reached
    assert f"root@{server.host}:{server.port}: authenticated" in reached["detail"]
    assert "host key ssh-ed25519 SHA256:" in reached["detail"] and "`true` ran" in reached["detail"]
    assert capability["check"] == "CAP_NET_ADMIN" and capability["ok"], capability
    assert "the SSH user root" in capability["detail"]
    assert not refused["ok"] and "unreachable" in refused["detail"]
    assert "Authentication failed" in refused["detail"], refused


@contextlib.contextmanager
def _inside(ns: str) -> Iterator[None]:
    """This thread's new sockets in ``ns`` (where the node's sshd listens)."""
    netns.pushns(ns)
    try:
        yield
    finally:
        netns.popns()


@needs_sshd
def test_plan_over_a_reachable_ssh_target_goes_on_to_read_the_tree(tmp_path: Path) -> None:
    ns = f"gdp-{uuid.uuid4().hex[:8]}"
    sh("ip", "netns", "add", ns)
    try:
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "link", "add", "va", "type", "veth", "peer", "name", "vb")
        prefix = ["ip", "netns", "exec", ns]
        with sshd.start(workdir=tmp_path / "sshd", netns_prefix=prefix) as server, _inside(ns):
            configuration, secrets = _conf(server, server.client_key)
            plan = plan_add_latency(
                interface="va",
                delay_seconds=0.1,
                destinations=["192.0.2.0/24"],
                target=f"ssh:{server.host}:{server.port}",
                configuration=configuration,
                secrets=secrets,
            )
    finally:
        sh("ip", "netns", "delete", ns, check=False)
    checks = {c["check"]: c for c in plan["preflight"]}
    assert checks["SSH reachable"]["ok"] and checks["CAP_NET_ADMIN"]["ok"], checks
    assert "kernel and CAP_NET_ADMIN" in checks  # the action's own preflight ran after
    assert plan["blast_radius"]["target"] == f"ssh:{server.host}:{server.port}"


def test_a_pod_target_asks_whether_its_pod_and_node_may_be_read(
    emulator: EmulatorHandle,  # noqa: F811 - the imported fixture
    ledger_path: Path,
) -> None:
    latency = {"interface": "eth0", "delay_seconds": 0.1, "destinations": ["192.0.2.0/24"]}
    emulator.allow(AllowRule(("get",), ("nodes",)))
    denied = plan_add_latency(**latency, target="pod:shop/web-1")
    (check,) = denied["preflight"]  # nothing else tried: the pod's node cannot be found
    assert check["check"] == "RBAC: get pods web-1" and not check["ok"]
    assert check["detail"] == "get pods web-1 is denied in namespace shop (needed to find its node)"

    emulator.allow(AllowRule(("get",), ("nodes", "pods")))
    missing = plan_add_latency(**latency, target="pod:shop/web-1")
    rbac, ssh = missing["preflight"]
    assert rbac["check"] == "RBAC" and rbac["ok"], rbac
    assert ssh["check"] == "SSH reachable" and not ssh["ok"]
    assert "pod:shop/web-1: no node to reach: read pod shop/web-1: HTTP 404" in ssh["detail"]
    assert not ledger_path.exists()
