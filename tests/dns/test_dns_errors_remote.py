"""inject_dns_errors on a node over SSH (``ssh:``) and in a pod's namespace on its node (``pod:``).

The node is a real OpenSSH server (Debian's sshd); what it runs is the node's
own ``nft``, ``conntrack`` and ``python3`` (Debian's), so the proxy that
answers is the zip application the action ships, not this process's code.
The resolver is a real dnsmasq in the server namespace; queries are sent with
dnspython from inside the client namespace, as in ``test_dns_errors.py``.

* ``ssh:``: sshd runs inside the client namespace, so the node's own network
  namespace is the client's (as for ``test_dns_rate_limit_ssh``).
* ``pod:``: the pod is served by the Kubernetes API emulator (kmock, over HTTP,
  the real ``kubernetes`` client); its node's InternalIP is 127.0.0.1, where
  sshd listens (host loopback). The pod's container is a ``sleep`` started in
  the client namespace. There is no container runtime here, so the node's
  ``crictl`` is a stand-in script on the SSH session's PATH: it answers
  ``crictl inspect --output go-template --template {{.info.pid}} ID`` with the
  sleep's pid for that container id (and fails for any other), as containerd's
  would. Everything after (``nsenter`` into /proc/PID/ns/net, the node's
  ``nft``/``conntrack``/``python3``) is real.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import subprocess
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import dns.exception
import dns.message
import dns.query
import dns.rcode
import pytest
from support import k8s_emulator
from support.dns_errors import (
    RECORDS,
    address,
    ask,
    conntrack_to,
    killed_run_experiment,
    run_then_kill,
    two_names,
)
from support.dns_netlab import SERVER_IP, ResolverPair, host_tables, netns_tables
from support.harness import wait_for
from support.servers import sshd

from chaos_ext._core.ledger import Ledger
from chaos_ext._core.rbac import Rule, rbac_of
from chaos_ext._core.targets.netns import run_in_netns
from chaos_ext.dns import _dnserr, _dnserr_remote
from chaos_ext.dns.actions import inject_dns_errors, remove_dns_errors
from chaos_ext.dns.plan import plan_inject_dns_errors
from chaos_ext.errors import PreflightFailed

T = TypeVar("T")
CONTAINER_ID = "ab12" * 16
pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(not Path(sshd.SSHD).exists(), reason="openssh-server missing"),
    pytest.mark.skipif(
        not (shutil.which("nft") and shutil.which("conntrack")),
        reason="the node needs Debian's nft and conntrack",
    ),
]


def _inside(pair: ResolverPair, func: Callable[[], T]) -> T:
    return run_in_netns(f"/run/netns/{pair.client_ns}", func, timeout=120)


def proxies(token: str) -> list[int]:
    """The node's proxy for this entry, by its file in /proc (an independent look)."""
    wanted = f"{_dnserr_remote.RUN_DIR}/{token}.pyz"
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if wanted.encode() in cmdline.split(b"\0"):
                found.append(int(entry))
    return found


def assert_nothing_left(pair: ResolverPair, applied: dict[str, Any]) -> None:
    token = applied["ledger_id"]
    assert netns_tables(pair.client_ns) == []
    assert proxies(token) == []
    assert glob.glob(f"{_dnserr_remote.RUN_DIR}/{token}.*") == []
    assert conntrack_to(pair, sorted(applied["proxy_ports"].values())) == []


def assert_errors_on(pair: ResolverPair) -> None:
    for tcp in (False, True):
        got = ask(pair, "a.test", tcp=tcp)
        assert got is not None and got.rcode() == dns.rcode.NXDOMAIN, got
        assert address(ask(pair, "b.test", tcp=tcp)) == RECORDS["b.test"]


@pytest.fixture
def pair(ledger_path: Path) -> Iterator[ResolverPair]:
    with two_names() as made:
        yield made


@pytest.fixture
def node(pair: ResolverPair, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """sshd in the client namespace: the node whose own namespace the fault goes to."""
    prefix = ["ip", "netns", "exec", pair.client_ns]
    with sshd.start(workdir=tmp_path / "sshd", netns_prefix=prefix) as server:
        yield {
            "target": f"ssh:{server.host}:{server.port}",
            "configuration": {"ssh_known_hosts": str(server.known_hosts)},
            "secrets": {"ssh_user": "root", "ssh_key_file": str(server.client_key)},
        }


@pytest.mark.undoes("dns-errors")
@pytest.mark.rolls_back("dns-errors")
def test_on_a_node_over_ssh_the_nodes_own_tools_answer_and_the_rollback_leaves_nothing(
    pair: ResolverPair, node: dict[str, Any], ledger_path: Path
) -> None:
    plan = _inside(pair, lambda: plan_inject_dns_errors(["a.*"], "nxdomain", **node))
    assert all(check["ok"] for check in plan["preflight"]), plan["preflight"]
    node_conf = _dnserr.parse_resolv_conf(Path("/etc/resolv.conf").read_text())
    assert plan["blast_radius"]["resolvers"] == [str(r) for r in node_conf]  # the node's own
    assert netns_tables(pair.client_ns) == []

    applied = _inside(
        pair, lambda: inject_dns_errors(["a.*"], "nxdomain", resolvers=[SERVER_IP], **node)
    )
    assert netns_tables(pair.client_ns) == [applied["table"]]
    assert proxies(applied["ledger_id"]) == [applied["proxy_pid"]]
    assert_errors_on(pair)
    (entry,) = Ledger(ledger_path).open_entries()
    assert entry.recipe["connection"]["ssh"]["key_file"] == node["secrets"]["ssh_key_file"]
    assert "PRIVATE KEY" not in str(entry.recipe)  # the key's path, never the key

    removed = _inside(pair, lambda: remove_dns_errors(**node))
    assert removed["undone"] == 1, removed
    (undone,) = removed["faults"]  # the node's conntrack forgot the flows it redirected
    assert re.search(r"deleted; [1-9][0-9]* redirected flow\(s\) forgotten", undone["note"])
    assert_nothing_left(pair, applied)
    for tcp in (False, True):
        assert address(ask(pair, "a.test", tcp=tcp)) == RECORDS["a.test"]
    assert Ledger(ledger_path).open_entries() == []


def test_on_a_node_the_duration_ends_it_by_itself_over_ssh(
    pair: ResolverPair, node: dict[str, Any], ledger_path: Path
) -> None:
    applied = _inside(
        pair,
        lambda: inject_dns_errors(
            ["a.test"], "servfail", resolvers=[SERVER_IP], duration_seconds=2, **node
        ),
    )
    assert ask(pair, "a.test").rcode() == dns.rcode.SERVFAIL
    wait_for(lambda: Ledger(ledger_path).open_entries() == [], 30, "the undo at the deadline")
    assert_nothing_left(pair, applied)
    assert address(ask(pair, "a.test")) == RECORDS["a.test"]


def test_a_node_proxy_that_ends_takes_its_table_and_files_with_it(
    pair: ResolverPair, node: dict[str, Any], ledger_path: Path
) -> None:
    """The runner, its watchdog and the SSH session all gone: the proxy's own exit (SIGTERM
    here, its cap otherwise) still removes the redirect, with the node's own nft."""
    applied = _inside(
        pair, lambda: inject_dns_errors(["a.test"], "refused", resolvers=[SERVER_IP], **node)
    )
    os.kill(applied["proxy_pid"], signal.SIGTERM)
    wait_for(lambda: netns_tables(pair.client_ns) == [], 20, "the proxy deletes its table")
    wait_for(lambda: proxies(applied["ledger_id"]) == [], 20, "the proxy exits")
    assert glob.glob(f"{_dnserr_remote.RUN_DIR}/{applied['ledger_id']}.*") == []
    assert address(ask(pair, "a.test")) == RECORDS["a.test"]
    removed = _inside(pair, lambda: remove_dns_errors(**node))  # idempotent: nothing left
    assert removed["undone"] == 1
    assert Ledger(ledger_path).open_entries() == []


def test_a_second_injection_on_the_node_is_refused(
    pair: ResolverPair, node: dict[str, Any]
) -> None:
    applied = _inside(
        pair, lambda: inject_dns_errors(["a.test"], "nxdomain", resolvers=[SERVER_IP], **node)
    )
    try:
        with pytest.raises(Exception, match="already has DNS errors injected"):
            _inside(
                pair,
                lambda: inject_dns_errors(["b.test"], "nxdomain", resolvers=[SERVER_IP], **node),
            )
        assert netns_tables(pair.client_ns) == [applied["table"]]
    finally:
        _inside(pair, lambda: remove_dns_errors(**node))
    assert_nothing_left(pair, applied)


@pytest.fixture
def pod_node(
    pair: ResolverPair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    """A pod whose container is a sleep in the client namespace, on a node reached by SSH."""
    container = subprocess.Popen(["ip", "netns", "exec", pair.client_ns, "sleep", "300"])
    bin_dir = tmp_path / "node-bin"
    bin_dir.mkdir()
    crictl = bin_dir / "crictl"
    crictl.write_text(
        "#!/bin/sh\n"
        "# stands in for containerd's crictl (no container runtime on this machine):\n"
        "# crictl inspect --output go-template --template '{{.info.pid}}' ID\n"
        f'[ "$1" = inspect ] && [ "$6" = {CONTAINER_ID} ] && echo {container.pid} && exit 0\n'
        "echo 'container not found' >&2; exit 1\n"
    )
    crictl.chmod(0o755)
    path = f"{bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    cluster = k8s_emulator.start(tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    try:
        cluster.put(_pod(), _node())
        with sshd.start(workdir=tmp_path / "sshd", path=path) as server:
            yield {
                "target": "pod:shop/web-1",
                "configuration": {
                    "ssh_known_hosts": str(server.known_hosts),
                    "ssh_node_port": server.port,
                },
                "secrets": {"ssh_user": "root", "ssh_key_file": str(server.client_key)},
                "container_pid": container.pid,
            }
    finally:
        cluster.stop()
        container.kill()
        container.wait(10)


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "shop"},
        "spec": {"nodeName": "node-a", "containers": [{"name": "app", "image": "shop/web:1"}]},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "app",
                    "containerID": f"containerd://{CONTAINER_ID}",
                    "ready": True,
                    "image": "shop/web:1",
                    "imageID": "sha256:" + "1" * 64,
                    "restartCount": 0,
                }
            ],
        },
    }


def _node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-a"},
        "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]},
    }


@pytest.mark.rolls_back("dns-errors")
def test_in_a_pod_through_its_node_the_pods_namespace_only(
    pair: ResolverPair, pod_node: dict[str, Any], ledger_path: Path
) -> None:
    arguments = {k: v for k, v in pod_node.items() if k != "container_pid"}
    before = host_tables()
    applied = inject_dns_errors(["a.*"], "nxdomain", resolvers=[SERVER_IP], **arguments)
    assert applied["target"] == "pod:shop/web-1"
    assert netns_tables(pair.client_ns) == [applied["table"]]
    assert host_tables() == before  # the node's own namespace (this host's here) untouched
    assert_errors_on(pair)
    (entry,) = Ledger(ledger_path).open_entries()
    assert entry.recipe["connection"]["pid"] == pod_node["container_pid"]
    assert entry.recipe["connection"]["node"] == "node-a"

    removed = remove_dns_errors(**arguments)
    assert removed["undone"] == 1, removed
    assert_nothing_left(pair, applied)
    assert address(ask(pair, "a.test")) == RECORDS["a.test"]


def test_the_node_proxy_is_a_zip_of_standard_library_modules_only(tmp_path: Path) -> None:
    """What ships to the node runs on a bare python3 (no site-packages, none of gameday's
    dependencies) and holds only the three modules and its main."""
    shipped = tmp_path / "proxy.pyz"
    shipped.write_bytes(_dnserr_remote.bundle())
    with zipfile.ZipFile(shipped) as zipped:
        assert sorted(zipped.namelist()) == [
            "__main__.py",
            "chaos_ext/__init__.py",
            "chaos_ext/dns/__init__.py",
            "chaos_ext/dns/_dnserr_node.py",
            "chaos_ext/dns/_dnserr_proxy.py",
            "chaos_ext/dns/_dnserr_wire.py",
        ]
    loads = "import sys; sys.path.insert(0, sys.argv[1]); import chaos_ext.dns._dnserr_proxy"
    done = subprocess.run(
        ["/usr/bin/python3", "-I", "-S", "-c", loads, str(shipped)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.undoes("dns-errors")
@pytest.mark.slow
def test_sigkill_of_the_runner_the_node_fault_ends_at_its_deadline_over_ssh(
    pair: ResolverPair,
    node: dict[str, Any],
    ledger_path: Path,
    tmp_path: Path,
    write_experiment: Callable[..., Path],
) -> None:
    """The runner (in the client namespace, where the node's sshd listens) is SIGKILLed with
    the fault on; its watchdog reconnects from the ledger's connection and undoes it."""
    duration = 8.0
    experiment = killed_run_experiment(
        node["target"], duration, node["configuration"], node["secrets"]
    )
    prefix = ["ip", "netns", "exec", pair.client_ns]
    path = write_experiment(experiment)
    _, seen = run_then_kill(pair, ledger_path, tmp_path, path, prefix)
    assert ask(pair, "a.test").rcode() == dns.rcode.NXDOMAIN  # still on, the runner dead
    (entry,) = Ledger(ledger_path).open_entries()
    token = entry.recipe["token"]
    assert proxies(token), "the node's proxy runs"
    wait_for(lambda: Ledger(ledger_path).open_entries() == [], duration + 12, "the watchdog")
    assert time.monotonic() - seen < duration + 12  # before the proxy's own cap (+15 s)
    assert netns_tables(pair.client_ns) == [] and proxies(token) == []
    assert glob.glob(f"{_dnserr_remote.RUN_DIR}/{token}.*") == []
    assert address(ask(pair, "a.test")) == RECORDS["a.test"]
    assert "redirected flow(s) forgotten" in str(Ledger(ledger_path).history()[0].note)


def test_pod_targets_declare_their_rbac() -> None:
    for activity in (inject_dns_errors, remove_dns_errors):
        assert set(rbac_of(activity)) == {
            Rule("", "pods", ("get",)),
            Rule("", "nodes", ("get",), cluster_scoped=True),
        }


def test_a_node_without_python3_is_refused_before_anything_is_recorded(
    pair: ResolverPair, tmp_path: Path, ledger_path: Path
) -> None:
    """The node's PATH has nft, cat, setsid and pgrep but no python3: one clear refusal."""
    bin_dir = tmp_path / "node-bin"
    bin_dir.mkdir()
    for tool in ("nft", "cat", "setsid", "pgrep"):
        found = shutil.which(tool)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)
    prefix = ["ip", "netns", "exec", pair.client_ns]
    with sshd.start(workdir=tmp_path / "sshd", netns_prefix=prefix, path=str(bin_dir)) as server:
        arguments = {
            "target": f"ssh:{server.host}:{server.port}",
            "configuration": {"ssh_known_hosts": str(server.known_hosts)},
            "secrets": {"ssh_user": "root", "ssh_key_file": str(server.client_key)},
        }
        with pytest.raises(PreflightFailed, match=r"has no python3 3\.9 or later"):
            _inside(
                pair,
                lambda: inject_dns_errors(
                    ["a.test"], "nxdomain", resolvers=[SERVER_IP], **arguments
                ),
            )
    assert netns_tables(pair.client_ns) == []
    assert not ledger_path.exists() or Ledger(ledger_path).history() == []
