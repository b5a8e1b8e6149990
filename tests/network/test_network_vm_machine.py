"""The micro-VM harness itself: boot once, run commands, a long-lived server reached
through a forwarded port, time caps, power-off (the API the local sandbox builds on)."""

from __future__ import annotations

import os
import shutil
import time
import urllib.request
from pathlib import Path

import pytest

from chaos_ext._products.sandbox.vm.machine import VirtualMachine, VMConfig

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("GAMEDAY_IN_VM") == "1", reason="already inside the VM"),
    pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="no qemu"),
]


@pytest.mark.timeout(420)
def test_boot_run_serve_and_power_off() -> None:
    config = VMConfig(work_dir=ROOT / ".vm", cwd=ROOT, forward_ports=(8080,))
    with VirtualMachine(config) as vm:
        uname = vm.run(["uname", "-r"], timeout=60)
        assert (uname.exit_code, uname.stdout.strip()) == (0, vm.kernel_release)
        failing = vm.run(["sh", "-c", "echo oops >&2; exit 7"], timeout=60)
        assert (failing.exit_code, failing.stderr) == (7, "oops\n")
        capped = vm.run(["sleep", "60"], timeout=2)
        assert capped.timed_out and capped.exit_code != 0

        (vm.share / "www").mkdir()
        (vm.share / "www" / "hello.txt").write_text("from the host, served by the guest\n")
        server = vm.spawn(
            [config.python, "-m", "http.server", "8080", "--bind", "0.0.0.0"],
            timeout=300,
            cwd="/run/vmshare/www",
        )
        url = f"http://127.0.0.1:{vm.host_port(8080)}/hello.txt"
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    body = response.read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline, server.output()
                time.sleep(1)
        assert body == "from the host, served by the guest\n"
        stopped = server.stop()
        assert not stopped.timed_out and "GET /hello.txt" in stopped.stderr
    assert vm._proc is None  # powered off
    with pytest.raises(Exception, match="not running"):
        vm.run(["true"], timeout=5)


def test_a_checkout_under_the_hosts_tmp_is_visible_in_the_guest(tmp_path: Path) -> None:
    """CI clones into /tmp; the guest's own tmpfs /tmp must not hide it."""
    assert str(tmp_path).startswith("/tmp/")
    (tmp_path / "marker.txt").write_text("the checkout\n")
    with VirtualMachine(VMConfig(work_dir=ROOT / ".vm", cwd=tmp_path)) as vm:
        seen = vm.run(["cat", "marker.txt"], timeout=60)
        assert (seen.exit_code, seen.stdout) == (0, "the checkout\n"), seen.stderr
        scratch = vm.run(
            ["sh", "-c", "echo x > /tmp/guest-only && cat /tmp/guest-only"], timeout=60
        )
        assert scratch.stdout == "x\n"  # the guest's /tmp stays its own, writable
    assert not (tmp_path.parent / "guest-only").exists()
