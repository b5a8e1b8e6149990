"""What a newcomer meets first (issue 48, item 6): quiet logs, messages printed whole.

Each test runs the real CLI in a subprocess (its own interpreter, so the logging
set-up and the modules imported are those of a real ``gameday``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.harness import cli_env, gameday_argv
from support.unprivileged import nobody_dir, run_as_nobody

# a chaostoolkit-prometheus probe (it logs through logzero) against a port nothing listens on
PROMETHEUS_PROBE_EXPERIMENT = {
    "title": "a chaostoolkit-prometheus probe",
    "description": "its DEBUG line must not reach the console without --debug",
    "configuration": {"prometheus_base_url": "http://127.0.0.1:9"},
    "steady-state-hypothesis": {
        "title": "up",
        "probes": [
            {
                "type": "probe",
                "name": "up",
                "tolerance": True,
                "provider": {
                    "type": "python",
                    "module": "chaosprometheus.probes",
                    "func": "query",
                    "arguments": {"query": "vector(1)"},
                },
            }
        ],
    },
    "method": [
        {"type": "action", "name": "nothing", "provider": {"type": "process", "path": "true"}}
    ],
}


def _our_probe_experiment() -> dict[str, object]:
    """gameday's own Prometheus probe against a port nothing listens on (its client retries
    through urllib3, which logs each retry as a WARNING)."""
    probe = {
        "type": "probe",
        "name": "up",
        "tolerance": 1,
        "provider": {
            "type": "python",
            "module": "chaos_ext.prometheus.probes",
            "func": "query_value",
            "arguments": {"expr": "vector(1)"},
        },
    }
    return {
        **PROMETHEUS_PROBE_EXPERIMENT,
        "configuration": {"prometheus_url": "http://127.0.0.1:9"},
        "steady-state-hypothesis": {"title": "up", "probes": [probe]},
    }


def _cli(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> Any:
    """Run ``argv`` (the CLI, or python -c) in ``cwd`` with a ledger there; its output kept."""
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=100,
        env=env or cli_env(cwd / "ledger.sqlite3"),
        cwd=cwd,
        check=False,
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("flags", "shown"), [([], False), (["--debug"], True)])
@pytest.mark.parametrize(
    ("experiment_of", "noise"),
    [
        (lambda: PROMETHEUS_PROBE_EXPERIMENT, "Querying with"),  # chaostoolkit-prometheus DEBUG
        (_our_probe_experiment, "Retrying"),  # urllib3's retry WARNING
    ],
)
def test_library_noise_shows_only_with_debug(
    tmp_path: Path, flags: list[str], shown: bool, experiment_of: Any, noise: str
) -> None:
    experiment = tmp_path / "prom.json"
    experiment.write_text(json.dumps(experiment_of()))
    done = _cli(gameday_argv(*flags, "run", "--settle", "0", str(experiment)), tmp_path)
    assert done.returncode == 4, done.stderr  # unsteady: the probe could not measure
    assert (noise in done.stderr) is shown, done.stderr


@pytest.mark.timeout(60)
def test_an_error_naming_the_sandbox_extra_prints_its_brackets(tmp_path: Path) -> None:
    """rich would take ``[sandbox]`` for a style tag and drop it from the message."""
    code = (
        "import sys; sys.modules['bcrypt'] = None  # as if the sandbox extra were missing\n"
        "from chaos_ext.cli.main import main\n"
        "sys.exit(main(['--no-color', 'sandbox', 'up']))\n"
    )
    done = _cli([sys.executable, "-c", code], tmp_path)
    assert done.returncode == 3, done.stderr
    assert "pip install 'chaos_ext[sandbox]'" in done.stderr, done.stderr


@pytest.mark.timeout(60)
def test_an_exception_text_with_brackets_is_printed_whole(tmp_path: Path) -> None:
    """The CLI's last line of defence prints the exception's text as it is."""
    code = (
        "import sys\n"
        "from chaos_ext.cli import main as cli\n"
        "def boom(args, console):\n"
        "    raise RuntimeError(\"pip install 'chaos_ext[sandbox]' [bold]as is[/bold]\")\n"
        "parse = cli._parse\n"
        "def parsed(argv):\n"
        "    args = parse(argv)\n"
        "    args.handler = boom\n"
        "    return args\n"
        "cli._parse = parsed\n"
        "sys.exit(cli.main(['--no-color', 'faults']))\n"
    )
    done = _cli([sys.executable, "-c", code], tmp_path)
    assert done.returncode == 2, done.stderr
    assert "RuntimeError: pip install 'chaos_ext[sandbox]' [bold]as is[/bold]" in done.stderr


@pytest.mark.timeout(180)
def test_ledger_as_non_root_says_in_one_line_what_it_could_not_look_at() -> None:
    """As nobody, other network namespaces cannot be entered (setns needs CAP_SYS_ADMIN):
    one line says so, no note per namespace, and never "no orphan on this machine"."""
    with nobody_dir() as home:
        listed = run_as_nobody(home, "--no-color", "ledger")
        scanned = run_as_nobody(home, "--no-color", "ledger", "--scan")
    for done in (listed, scanned):
        assert done.returncode == 1, done.stderr  # it cannot say the machine is clean
        assert "cannot enter network namespace" not in done.stderr, done.stderr
        assert "no orphan on this machine" not in done.stderr, done.stderr
        assert "(you must be root)" not in done.stderr  # libnftables' own EPERM text
        said = [line for line in done.stderr.splitlines() if "CAP_SYS_ADMIN" in line]
        assert len(said) == 1, done.stderr
        assert "own network namespace" in said[0], said
    assert "this machine only partly scanned" in listed.stderr, listed.stderr


def _no_cluster_env(home: Path) -> dict[str, str]:
    """The CLI's environment with no way to a cluster: no kubeconfig, not in a pod."""
    env = {
        k: v
        for k, v in cli_env(home / "ledger.sqlite3").items()
        if not k.startswith(("KUBE", "CHAOSTOOLKIT_IN_POD"))
    }
    return {**env, "HOME": str(home)}


DRAIN_EXPERIMENT = {
    "title": "drain one node",
    "description": "needs a cluster",
    "method": [
        {
            "type": "action",
            "name": "drain-one",
            "provider": {
                "type": "python",
                "module": "chaos_ext.node.actions",
                "func": "drain_nodes",
                "arguments": {"label_selector": "role=worker", "count": 1, "max_fraction": 0.5},
            },
        }
    ],
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", [["plan"], ["run", "--settle", "0"]])
def test_no_kubeconfig_is_one_refusal_line_naming_where_it_looked(
    tmp_path: Path, command: list[str]
) -> None:
    experiment = tmp_path / "drain.json"
    experiment.write_text(json.dumps(DRAIN_EXPERIMENT))
    done = _cli(
        gameday_argv("--no-color", *command, str(experiment)), tmp_path, _no_cluster_env(tmp_path)
    )
    assert done.returncode == 3, done.stderr
    assert "urllib3" not in done.stderr and "localhost" not in done.stderr, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if "no kubeconfig found" in x]
    for tried in ("--kubeconfig (not given)", "$KUBECONFIG (not set)", "/.kube/config"):
        assert tried in line, line
    assert "in-cluster" in line and line.endswith("; nothing injected"), line
    assert not (tmp_path / "journal-drain.json").exists()  # refused before the run


LATENCY_AND_RATE_EXPERIMENT = {
    "title": "network faults without CAP_NET_ADMIN",
    "description": "refused before anything is injected",
    "method": [
        {
            "type": "action",
            "name": "delay-lo",
            "provider": {
                "type": "python",
                "module": "chaos_ext.network.actions",
                "func": "add_latency",
                "arguments": {
                    "interface": "lo",
                    "delay_seconds": 0.1,
                    "destinations": ["192.0.2.0/24"],
                    "duration_seconds": 5,
                },
            },
        },
        {
            "type": "action",
            "name": "limit-dns",
            "provider": {
                "type": "python",
                "module": "chaos_ext.dns.actions",
                "func": "limit_dns_rate",
                "arguments": {"pps": 100},
            },
        },
    ],
}


@pytest.mark.timeout(180)
def test_a_network_fault_without_cap_net_admin_is_refused_before_anything_is_injected() -> None:
    """As nobody, each fault needing CAP_NET_ADMIN is one refusal line (its own plan says
    so, no kind named by the runner), exit 3, no journal and no ledger entry."""
    with nobody_dir() as home:
        experiment = home / "net.json"
        experiment.write_text(json.dumps(LATENCY_AND_RATE_EXPERIMENT))
        experiment.chmod(0o644)
        done = run_as_nobody(home, "--no-color", "run", "--settle", "0", str(experiment))
        vary = "delay-lo.delay_seconds=0.05..0.2"
        envelope = run_as_nobody(home, "--no-color", "envelope", str(experiment), "--vary", vary)
        entries = run_as_nobody(home, "ledger", "--all", "--no-scan", "--json")
        journals = sorted(p.name for p in home.rglob("journal*.json"))
    for command in (done, envelope):
        assert command.returncode == 3, command.stderr
        refused = [x for x in command.stderr.splitlines() if x.startswith("refused: ")]
        assert [x.split(": ")[2] for x in refused] == ["delay-lo", "limit-dns"], command.stderr
        for line in refused:
            assert "lacks CAP_NET_ADMIN" in line and line.endswith("; nothing injected"), line
        assert "failed" not in command.stderr, command.stderr
    assert journals == []
    assert entries.returncode == 0 and json.loads(entries.stdout) == [], entries
