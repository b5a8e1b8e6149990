"""``gameday ledger --scan`` and ``gameday rollback --orphans`` (issue 27, item 3).

Each kind of object gameday leaves in the system is planted by the real
code path (a helper started by ``start_helper`` under a ledger entry, a DNS
rate limit by ``limit_dns_rate``, the latency tree's root as add_latency
installs it, a node cordoned by ``drain_nodes`` in the Kubernetes emulator,
a load's Job and Secret as ``drive_http_load`` builds them, a sidecar
template change by ``change_sidecar_template`` with its backup ConfigMap), then the
ledger's database, event log and marker are deleted. The real CLI must find
each one as an orphan, and ``rollback --orphans`` must leave nothing: that
is checked through the objects' own interfaces (``/proc``, ``nft``, ``tc``,
the emulator's state), never through the scan.

This machine is shared with other test sessions whose objects may look
orphaned to this one, so the removal is narrowed to the planted objects
with ``--only`` (their refs, read from the scan).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import istio_fixtures as istio
from support import k8s_objects as o
from support.faultkit import hold_port, port_open
from support.harness import cli_env, gameday_argv, pythonpath
from support.k8s_emulator import EmulatorHandle, emulator  # noqa: F401 - the fixture
from support.latency_stand_in import stand_in_latency

from chaos_ext._core.helper import stop_helpers
from chaos_ext._core.ledger import Ledger
from chaos_ext.dns.actions import limit_dns_rate, remove_dns_rate_limit
from chaos_ext.load import _job
from chaos_ext.node.actions import drain_nodes
from chaos_ext.sidecar.actions import change_sidecar_template, restore_sidecar_template

pytestmark = [pytest.mark.timeout(300), pytest.mark.orphans]
Run = Callable[..., subprocess.CompletedProcess[str]]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _lose_ledger(ledger: Path) -> None:
    """Delete the ledger's database, event log, lock files and marker folder."""
    for part in ledger.parent.glob(ledger.name + "*"):
        part.unlink()
    shutil.rmtree(os.environ["GAMEDAY_LEDGER_MARKERS"], ignore_errors=True)


def _found(run: Run, *extra: str) -> dict[str, dict[str, Any]]:
    result = run("ledger", "--scan", "--json", *extra)
    assert result.returncode in (0, 1), result.stderr
    return {f["ref"]: f for f in json.loads(result.stdout)["found"]}


def _nft_tables(ns: str) -> list[str]:
    out = subprocess.run(
        ["ip", "netns", "exec", ns, "nft", "-j", "list", "tables"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    return [i["table"]["name"] for i in json.loads(out)["nftables"] if "table" in i]


def _root_qdisc(ns: str, interface: str) -> str:
    return subprocess.run(
        ["ip", "netns", "exec", ns, "tc", "qdisc", "show", "dev", interface, "root"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout


@pytest.fixture
def netns(netns_name: str) -> Iterator[str]:
    subprocess.run(["ip", "netns", "add", netns_name], check=True, timeout=10)
    subprocess.run(["ip", "-n", netns_name, "link", "set", "lo", "up"], check=True, timeout=10)
    try:
        yield netns_name
    finally:
        subprocess.run(["ip", "netns", "delete", netns_name], check=False, timeout=10)


@pytest.fixture
def tokens() -> Iterator[list[str]]:
    """Helper tokens whose processes are stopped after the test, whatever it did."""
    planted: list[str] = []
    yield planted
    for token in planted:
        stop_helpers(token)


def _inode(ns: str) -> str:
    return str(os.stat(f"/run/netns/{ns}").st_ino)


def _refs(found: dict[str, dict[str, Any]], *needles: str) -> list[str]:
    """The ref of each object whose ref contains a needle, in the needles' order."""
    refs = [[ref for ref in found if needle in ref] for needle in needles]
    assert all(len(r) == 1 for r in refs), (needles, sorted(found))
    return [r[0] for r in refs]


@pytest.mark.undoes("netem-orphan")
@pytest.mark.undoes("helper-orphan")
def test_local_orphans_are_found_without_a_ledger_and_removed(
    gameday: Run,
    ledger_path: Path,
    netns: str,
    monkeypatch: pytest.MonkeyPatch,
    tokens: list[str],
) -> None:
    monkeypatch.setenv("PYTHONPATH", pythonpath())  # the helper module lives in tests/support
    port = _free_port()
    holder = hold_port(port, seconds=240)
    limit = limit_dns_rate(pps=100, resolvers=["10.0.0.2"], target=f"netns:{netns}")
    stand_in_latency("lo", f"netns:{netns}")
    table = limit["table"].split()[-1]
    book = Ledger(ledger_path)
    ids = {e.kind: e.id for e in book.open_entries()}
    tokens.append(ids["test-port"])
    before = _found(gameday)
    refs = _refs(before, f"helper:{ids['test-port']}", f":{table}", f"{_inode(netns)}:lo")
    helper_ref, table_ref, tree_ref = refs
    owners = {ref: [x["entry"] for x in before[ref]["owners"]] for ref in refs}
    assert owners == {
        helper_ref: [ids["test-port"]],
        table_ref: [ids["dns-rate-limit"]],
        tree_ref: [ids["netem"]],
    }
    listed = gameday("ledger")
    assert not any(ref in listed.stderr for ref in refs), listed.stderr  # owned: not orphans

    _lose_ledger(ledger_path)
    found = _found(gameday)
    assert {found[ref]["status"] for ref in refs} == {"orphan"}
    listed = gameday("ledger")
    assert listed.returncode == 1, listed.stderr
    assert "no open faults" not in listed.stderr
    assert all(ref in listed.stderr for ref in refs), listed.stderr
    assert "gameday rollback --orphans" in listed.stderr
    plain = gameday("rollback")
    assert plain.returncode == 2, plain.stderr  # orphans named, not removed
    assert "nothing to roll back" not in plain.stderr
    assert table in _nft_tables(netns) and port_open(port)

    only = [arg for ref in refs for arg in ("--only", ref)]
    removed = gameday("rollback", "--orphans", *only)
    assert removed.returncode == 0, removed.stderr
    # checked through the objects themselves, not the scan
    assert not os.path.exists(f"/proc/{holder['pid']}") or _zombie(holder["pid"])
    assert not port_open(port)
    assert not [t for t in _nft_tables(netns) if t.startswith("gameday_dnsrate_")]
    assert "1d1a:" not in _root_qdisc(netns, "lo")
    # and the ledger recorded what was done: one closed entry per orphan
    closed = [e for e in Ledger(ledger_path).history() if e.state == "closed"]
    assert sorted(e.kind for e in closed) == ["dns-rate-limit", "helper-orphan", "netem-orphan"]
    after = _found(gameday)
    assert not set(refs) & set(after)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


def test_an_object_of_a_live_run_in_another_ledger_is_owned_and_never_removed(
    ledger_path: Path, tmp_path: Path, netns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run A's ledger has its marker in a folder the CLI does not know: the boot's
    registry of open entries still names it, so A's table is A's."""
    limit_dns_rate(pps=100, resolvers=["10.0.0.2"], target=f"netns:{netns}")
    table = next(e for e in Ledger(ledger_path).open_entries()).recipe["table"]
    other = tmp_path / "b" / "ledger.sqlite3"
    other.parent.mkdir()
    env = {**cli_env(other), "GAMEDAY_LEDGER_MARKERS": str(tmp_path / "b" / "markers")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            gameday_argv(*args),
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=False,
        )

    [ref] = _refs(_found(run), f":{table}")
    assert _found(run)[ref]["status"] == "owned"
    assert _found(run)[ref]["owners"][0]["ledger"] == str(ledger_path)
    assert _found(run)[ref]["owners"][0]["owner_alive"] is True
    kept = run("rollback", "--orphans", "--only", ref)
    assert kept.returncode == 0, kept.stderr
    assert table in _nft_tables(netns)
    remove_dns_rate_limit()  # run A's own rollback
    assert table not in _nft_tables(netns)


def test_kubernetes_orphans_are_found_without_a_ledger_and_removed(
    gameday: Run,
    ledger_path: Path,
    emulator: EmulatorHandle,  # noqa: F811 - the imported fixture
) -> None:
    pool = {"role": "eat-workers"}
    emulator.put([o.node(f"worker-{i}", pool) for i in range(3)], o.namespace("loads"))
    drained = drain_nodes(label_selector="role=eat-workers", count=1, pick="first")
    node = drained["nodes"][0]["name"]
    load_id = "0a1b2c3d4e5f6a7b"
    settings = _job.settings_from({"namespace": "loads", "pushgateway": "http://pg:9091"}, 2)
    emulator.put(
        _job.secret_manifest(load_id, settings, {"spec": "{}"}),
        _job.job_manifest(load_id, settings, 2, 600),
    )
    kubeconfig = os.environ["KUBECONFIG"]
    before = _found(gameday, "--kubeconfig", kubeconfig)
    node_ref, load_ref = refs = _refs(before, f":{drained['ledger_id']}", f":{load_id}")
    assert before[node_ref]["status"] == "owned"
    assert before[load_ref]["status"] == "orphan"  # no entry ever recorded it

    _lose_ledger(ledger_path)
    found = _found(gameday, "--kubeconfig", kubeconfig)
    assert {found[ref]["status"] for ref in refs} == {"orphan"}
    only = [arg for ref in refs for arg in ("--only", ref)]
    removed = gameday("rollback", "--orphans", "--kubeconfig", kubeconfig, *only)
    assert removed.returncode == 0, removed.stderr
    state = emulator.get("Node", None, node)
    assert state is not None
    assert not state["spec"].get("unschedulable")
    assert "chaos-ext.gameday/cordoned-by" not in (state["metadata"].get("annotations") or {})
    assert emulator.get("Job", "loads", _job.job_name(load_id)) is None
    assert emulator.get("Secret", "loads", _job.job_name(load_id)) is None
    assert not set(refs) & set(_found(gameday, "--kubeconfig", kubeconfig))


INJECTOR = ("ConfigMap", "istio-system", "istio-sidecar-injector")


def _backups(cluster: EmulatorHandle) -> list[str]:
    """The names of the backup ConfigMaps in the cluster, read from its state."""
    return sorted(
        cm["metadata"]["name"]
        for cm in cluster.items("ConfigMap")
        if (cm["metadata"].get("labels") or {}).get("chaos-ext.gameday/backup")
    )


def _change_template(cluster: EmulatorHandle) -> tuple[dict[str, str], str]:
    """Istio's injector, then a change of its values and a new key; (data before, ledger id)."""
    cluster.put(istio.injector_configmap(istio.injector_values(tag="1.22.3")))
    before = dict(cluster.get(*INJECTOR)["data"])  # type: ignore[index]
    changed = change_sidecar_template(
        values_patch={"global": {"tag": "1.23.1"}}, data={"gameday-note": "added\n"}
    )
    assert cluster.get(*INJECTOR)["data"] != before  # type: ignore[index]
    assert _backups(cluster) == [f"gameday-backup-{changed['ledger_id']}"]
    return before, str(changed["ledger_id"])


def test_a_sidecar_template_change_is_found_by_its_backup_and_restored_without_a_ledger(
    gameday: Run,
    ledger_path: Path,
    emulator: EmulatorHandle,  # noqa: F811 - the imported fixture
) -> None:
    before, change = _change_template(emulator)
    kubeconfig = os.environ["KUBECONFIG"]
    [ref] = _refs(_found(gameday, "--kubeconfig", kubeconfig), "sidecar:")
    assert ref.endswith(f":{change}")

    _lose_ledger(ledger_path)
    listed = gameday("ledger", "--scan", "--kubeconfig", kubeconfig)
    assert listed.returncode == 1, listed.stderr
    assert ref in listed.stdout + listed.stderr
    found = _found(gameday, "--kubeconfig", kubeconfig)
    assert found[ref]["status"] == "orphan"
    assert "istio-system/istio-sidecar-injector" in found[ref]["what"]
    removed = gameday("rollback", "--orphans", "--kubeconfig", kubeconfig, "--only", ref)
    assert removed.returncode == 0, removed.stderr
    # checked through the emulator's state, not the scan: every key as it was, the new one gone
    after = emulator.get(*INJECTOR)["data"]  # type: ignore[index]
    assert after == before and "gameday-note" not in after
    assert {k: v.encode() for k, v in after.items()} == {k: v.encode() for k, v in before.items()}
    assert _backups(emulator) == []
    closed = [e for e in Ledger(ledger_path).history() if e.state == "closed"]
    assert [(e.kind, e.id) for e in closed] == [("sidecar-template", change)]
    again = gameday("ledger", "--scan", "--json", "--kubeconfig", kubeconfig)
    left = json.loads(again.stdout)["found"]
    assert not [f for f in left if f["ref"].startswith("sidecar:")]
    # 0 unless another session's local object looks orphaned here (a shared machine)
    assert again.returncode == (1 if any(f["status"] != "owned" for f in left) else 0)


def test_a_live_runs_sidecar_template_change_is_owned_and_never_removed(
    ledger_path: Path,
    tmp_path: Path,
    emulator: EmulatorHandle,  # noqa: F811 - the imported fixture
) -> None:
    """The change's ledger is intact and its owner (this process) alive: --orphans leaves it."""
    before, change = _change_template(emulator)
    during = dict(emulator.get(*INJECTOR)["data"])  # type: ignore[index]
    other = tmp_path / "b" / "ledger.sqlite3"
    other.parent.mkdir()
    env = {**cli_env(other), "GAMEDAY_LEDGER_MARKERS": str(tmp_path / "b" / "markers")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        argv = gameday_argv(*args, "--kubeconfig", os.environ["KUBECONFIG"])
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=120, env=env, check=False
        )

    found = _found(run)
    [ref] = _refs(found, f":{change}")
    assert found[ref]["status"] == "owned"
    [owner] = found[ref]["owners"]
    assert owner["entry"] == change and owner["ledger"] == str(ledger_path)
    assert owner["owner_alive"] is True
    kept = run("rollback", "--orphans", "--only", ref)
    assert kept.returncode == 0, kept.stderr
    assert emulator.get(*INJECTOR)["data"] == during  # type: ignore[index]
    assert _backups(emulator) == [f"gameday-backup-{change}"]
    assert restore_sidecar_template()["undone"] == 1  # the run's own rollback
    assert emulator.get(*INJECTOR)["data"] == before  # type: ignore[index]
    assert _backups(emulator) == []


def test_an_unreadable_backup_is_an_orphan_that_is_not_undone(
    gameday: Run,
    emulator: EmulatorHandle,  # noqa: F811 - the imported fixture
) -> None:
    """A backup someone edited cannot say what to restore: listed, refused, left in place."""
    emulator.put(istio.injector_configmap(istio.injector_values(tag="1.22.3")))
    before = dict(emulator.get(*INJECTOR)["data"])  # type: ignore[index]
    change = "0f1e2d3c4b5a6978"
    bad = o.configmap("istio-system", f"gameday-backup-{change}", {"recipe.json": "{not json"})
    bad["metadata"]["labels"] = {"chaos-ext.gameday/backup": "sidecar-template"}
    bad["metadata"]["annotations"] = {
        "chaos-ext.gameday/ledger-id": change,
        "chaos-ext.gameday/backs-up": "istio-system/istio-sidecar-injector",
    }
    emulator.put(bad)
    kubeconfig = os.environ["KUBECONFIG"]
    [ref] = _refs(_found(gameday, "--kubeconfig", kubeconfig), f":{change}")
    refused = gameday("rollback", "--orphans", "--kubeconfig", kubeconfig, "--only", ref)
    assert refused.returncode == 2, refused.stderr
    assert "cannot be read" in refused.stdout + refused.stderr
    assert "restore the injector ConfigMap by hand" in refused.stdout + refused.stderr
    assert _backups(emulator) == [f"gameday-backup-{change}"]
    assert emulator.get(*INJECTOR)["data"] == before  # type: ignore[index]
