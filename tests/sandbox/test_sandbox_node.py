"""The vm backend's node, without booting it: addresses, the guest's routing, qemu's NICs,
where the latency fault goes; and the install scripts' progress lines."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.harness import ROOT

from chaos_ext._products.sandbox import _control, _node
from chaos_ext._products.sandbox._topology import topology
from chaos_ext._products.sandbox.heartbeat import Heartbeat
from chaos_ext._products.sandbox.vm.machine import VirtualMachine, VMConfig


def test_the_node_sits_on_the_bridge_next_to_the_hosts() -> None:
    topo = topology("gd")
    assert topo.node_address == "10.77.0.50"
    assert topo.node_address not in {h.address for h in topo.hosts}
    assert (topo.node_link, topo.node_bridge_port) == ("node0", "gdb-node")
    assert len(topology("abcdef").node_bridge_port) <= 15  # an interface name's limit
    assert topology("gd", "10.9.8.0/26").node_address == "10.9.8.50"


def test_the_guest_routes_only_the_app_through_its_app_link() -> None:
    batch = _node.guest_network_batch(topology("gd"))
    assert batch.splitlines() == [
        "link set lo up",
        "link set eth0 up",
        "link set eth1 up",
        "addr add 10.77.0.50/24 dev eth1",
        "route add 10.77.0.10/32 dev eth0",
    ]
    assert "net.ipv4.ip_forward=1" in _node.GUEST_SYSCTLS


def test_each_tap_becomes_a_virtio_nic_in_order() -> None:
    if not list(Path("/boot").glob("vmlinuz-*")):
        pytest.skip("no Debian kernel installed (linux-image-amd64)")
    vm = VirtualMachine(VMConfig(work_dir=Path("/nonexistent"), tap_fds=(7, 9)))
    argv = vm._qemu_argv(Path("initrd"), "tcg")
    assert "-nic" not in argv
    assert argv[argv.index("-netdev") + 1] == "tap,id=t0,fd=7"
    devices = [argv[i + 1] for i, a in enumerate(argv) if a == "-device"]
    assert devices == [
        "virtio-net-pci,netdev=t0,mac=52:54:00:9a:00:01",
        "virtio-net-pci,netdev=t1,mac=52:54:00:9a:00:02",
    ]
    probe = vm._qemu_argv(Path("initrd"), "kvm", with_taps=False)  # the KVM probe: no NICs
    assert "-netdev" not in probe and probe[probe.index("-nic") + 1] == "none"


def test_the_latency_fault_goes_to_the_app_or_to_the_node() -> None:
    topo = topology("gd")
    assert _control._latency_target(topo, None) == {
        "latency_target": "netns:gd-app",
        "latency_interface": "eth0",
    }
    ssh = {"host": "10.77.0.50", "port": 22, "key_file": "/k", "known_hosts": "/kh"}
    assert _control._latency_target(topo, ssh) == {
        "latency_target": "ssh:10.77.0.50:22",
        "latency_interface": "eth1",
        "ssh_key_file": "/k",
        "ssh_known_hosts": "/kh",
    }


def test_the_node_sshd_is_configured_for_the_guest_with_a_pinned_host_key(
    tmp_path: Path,
) -> None:
    files = _node.prepare_sshd(tmp_path / "sshd", "/run/vmshare/sshd", "10.77.0.50", 22)
    config = (tmp_path / "sshd" / "sshd_config").read_text().splitlines()
    assert "ListenAddress 10.77.0.50" in config
    assert "HostKey /run/vmshare/sshd/ssh_host_ed25519_key" in config
    assert "PasswordAuthentication no" in config
    host_key = (tmp_path / "sshd" / "ssh_host_ed25519_key.pub").read_text().split()[:2]
    assert files.known_hosts.read_text() == f"10.77.0.50 {' '.join(host_key)}\n"
    assert files.config_in_guest == "/run/vmshare/sshd/sshd_config"


def test_progress_speaks_up_while_a_command_is_silent() -> None:
    started = time.monotonic()
    done = subprocess.run(
        [
            str(ROOT / "scripts" / "progress.sh"),
            "waiting",
            "sh",
            "-c",
            "echo first; sleep 2.5; echo last; exit 3",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={"PROGRESS_EVERY": "1", "PATH": "/usr/bin:/bin"},
    )
    lines = done.stdout.splitlines()
    assert done.returncode == 3  # the command's own status
    assert lines[0] == "first" and lines[-1] == "last"
    beats = [line for line in lines if line.startswith("  ... waiting (")]
    assert 1 <= len(beats) <= 3, lines
    assert time.monotonic() - started < 10


def test_heartbeat_repeats_the_last_step_after_a_silence() -> None:
    said: list[str] = []
    with Heartbeat(said.append, every=0.6) as beat:
        beat.say("PostgreSQL in gd-db")
        time.sleep(1.6)
        beat.say("dnsmasq in gd-dns")
    assert said[0] == "PostgreSQL in gd-db" and said[-1] == "dnsmasq in gd-dns"
    beats = said[1:-1]
    assert 1 <= len(beats) <= 3, said
    assert all(b.startswith("... still: PostgreSQL in gd-db (") for b in beats)


def test_every_shipped_experiment_validates() -> None:
    """The game day's experiments (and the others) pass `gameday validate`: an argument
    renamed in an activity must be renamed in them too, before a demo finds out."""
    files = sorted(
        map(str, [*ROOT.glob("experiments/*.json"), *ROOT.glob("experiments/sandbox/*.json")])
    )
    assert len(files) >= 4
    done = subprocess.run(
        [sys.executable, "-m", "chaos_ext.cli.main", "validate", *files],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
