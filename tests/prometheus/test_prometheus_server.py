"""The reusable Prometheus launcher: own port/data dir, reload, netns, idempotent stop."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.exporter import Exporter
from support.promquery import wait_result

from chaos_ext._products.sandbox.servers import prometheus


def test_start_reload_and_stop_are_clean(exporter: Exporter) -> None:
    server = prometheus.start()
    workdir = server.workdir
    assert (workdir / "data").is_dir()
    server.set_targets({"later": [exporter.target]})  # SIGHUP: reload the new scrape jobs
    server.wait_scraped(timeout=30)
    assert wait_result(server, 'up{job="later"}')[0]["value"][1] == "1"
    server.stop()
    server.stop()  # idempotent
    assert server.process.poll() is not None
    assert not workdir.exists()


def test_runs_inside_a_network_namespace(netns_name: str, tmp_path: Path) -> None:
    subprocess.run(["ip", "netns", "add", netns_name], check=True, timeout=10)
    try:
        subprocess.run(["ip", "-n", netns_name, "link", "set", "lo", "up"], check=True, timeout=10)
        prefix = ["ip", "netns", "exec", netns_name]
        with prometheus.start(netns=prefix, port=9090) as server:  # a namespace has its own ports
            probe = subprocess.run(
                [
                    *prefix,
                    sys.executable,
                    "-c",
                    "import urllib.request as u; print(u.urlopen('http://127.0.0.1:9090/-/ready', "
                    "timeout=5).status)",
                ],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            assert probe.stdout.strip() == "200", probe.stderr
            pid = server.process.pid
        assert subprocess.run(["kill", "-0", str(pid)], check=False, timeout=5).returncode != 0
    finally:
        subprocess.run(["ip", "netns", "delete", netns_name], check=False, timeout=10)
