"""Settings reach the code as an object (chaos_ext._core.settings), never via os.environ.

``gameday --ledger`` in a real CLI run (the activity thread sees the ledger, the
process and its children keep the environment they had), in process (os.environ
unchanged), the watchdog's own environment, the kubeconfig and the context of an
undo, the DSN of the orphan undo, the DSN kept out of every repr, and a sandbox
service tagged in its own command (a real namespace, found by its token).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.harness import cli_env, gameday_argv

from chaos_ext._core import helper, k8s
from chaos_ext._core import ledger as fault_ledger
from chaos_ext._core.ledger import Entry, Ledger, undo_handler
from chaos_ext._core.settings import Settings, current_settings, use_settings
from chaos_ext._products.sandbox import _services
from chaos_ext.cli.main import main, settings_of
from chaos_ext.db.leftovers import DSN_VAR, scan_dsn
from chaos_ext.errors import TargetMismatch

Run = Callable[..., subprocess.CompletedProcess[str]]
SECRET = "s3cret-pw"  # looked for where it must not be
DSN = f"postgresql://app:{SECRET}@127.0.0.1:5999/app"


@undo_handler("settings-test")
def _undo_nothing(entry: Entry) -> str:
    return "nothing was injected"


@pytest.fixture
def root_logging() -> Iterator[None]:
    """``main`` sets the root logger up as the CLI does; give pytest's back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _probe_experiment(folder: Path) -> Path:
    env_probe = {
        "type": "process",
        "path": "sh",
        "arguments": ["-c", 'echo "child sees ${GAMEDAY_LEDGER:-nothing}"'],
    }
    experiment = {
        "title": "settings reach the activities",
        "description": "gameday --ledger, read in the activity thread",
        "method": [
            {
                "type": "probe",
                "name": "ledger-in-use",
                "provider": {
                    "type": "python",
                    "module": "support.settings_probe",
                    "func": "ledger_in_use",
                },
            },
            {"type": "probe", "name": "child-environment", "provider": env_probe},
        ],
        "rollbacks": [],
    }
    path = folder / "experiment.json"
    path.write_text(json.dumps(experiment))
    return path


def test_run_ledger_option_reaches_the_activities_not_the_environment(
    tmp_path: Path, ledger_path: Path
) -> None:
    chosen = tmp_path / "chosen" / "ledger.sqlite3"
    journal = tmp_path / "journal.json"
    ran = subprocess.run(
        gameday_argv(
            "--ledger",
            str(chosen),
            "run",
            str(_probe_experiment(tmp_path)),
            "--journal",
            str(journal),
        ),
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env(ledger_path),  # $GAMEDAY_LEDGER names another ledger: --ledger wins
        cwd=tmp_path,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    outputs = {r["activity"]["name"]: r["output"] for r in json.loads(journal.read_text())["run"]}
    # the activity thread uses --ledger; the process's environment still says what it said
    assert outputs["ledger-in-use"] == {"ledger": str(chosen), "environ": str(ledger_path)}
    assert outputs["child-environment"]["stdout"].strip() == f"child sees {ledger_path}"
    assert chosen.exists() and not ledger_path.exists()


def test_main_installs_the_settings_for_the_command_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, root_logging: None
) -> None:
    monkeypatch.delenv("GAMEDAY_LEDGER", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    chosen = tmp_path / "ledger.sqlite3"
    before = dict(os.environ)
    assert main(["--ledger", str(chosen), "ledger", "--no-scan", "--json"]) == 0
    assert dict(os.environ) == before
    assert chosen.exists()  # the command opened the ledger it was given
    assert current_settings() == Settings()  # and took its settings away when it ended


def test_settings_of_takes_the_options_and_nothing_else(monkeypatch: pytest.MonkeyPatch) -> None:
    from chaos_ext.cli.main import _parse  # noqa: PLC0415 - the parser main uses

    monkeypatch.setenv("KUBECONFIG", "/from/the/environment")  # read later, by the readers
    words = ["--ledger", "l.sqlite3", "rollback", "--kubeconfig", "~/k", "--context", "prod"]
    given = settings_of(_parse([*words, "--db-dsn", DSN]))
    assert given == Settings(
        ledger=Path("l.sqlite3"),
        kubeconfig=os.path.expanduser("~/k"),
        context="prod",
        db_dsn=DSN,
    )
    assert settings_of(_parse(["ledger", "--no-scan"])) == Settings()


def test_the_dsn_is_never_in_a_repr() -> None:
    given = Settings(ledger=Path("/l"), kubeconfig="/k", context="c", db_dsn=DSN)
    assert SECRET not in repr(given) and SECRET not in str(given)
    assert "/k" in repr(given)


def test_the_watchdog_gets_its_ledger_and_kubeconfig_in_its_own_environment(
    tmp_path: Path, ledger_path: Path
) -> None:
    chosen = tmp_path / "chosen.sqlite3"
    kubeconfig = str(tmp_path / "kubeconfig")
    before = dict(os.environ)
    with (
        use_settings(Settings(ledger=chosen, kubeconfig=kubeconfig, db_dsn=DSN)),
        fault_ledger.fault(
            kind="settings-test", target="nothing", recipe={}, module=__name__
        ) as entry,
    ):
        pid = int((entry.watchdog or {})["pid"])
        environ = Path(f"/proc/{pid}/environ").read_bytes().decode()
        Ledger(chosen).close(entry.id, "nothing was injected")
    assert dict(os.environ) == before
    variables = dict(item.split("=", 1) for item in environ.split("\0") if "=" in item)
    assert variables["GAMEDAY_LEDGER"] == str(chosen.absolute())
    assert variables["KUBECONFIG"] == kubeconfig
    assert SECRET not in environ and DSN_VAR not in variables
    assert not ledger_path.exists()  # recorded in the chosen ledger, not in $GAMEDAY_LEDGER's


def _kubeconfig(path: Path, server: str, context: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}],
                "current-context": context,
            }
        )
    )
    return path


def test_the_kubeconfig_of_the_command_comes_before_the_environments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = _kubeconfig(tmp_path / "mine", "https://127.0.0.1:6441", "mine")
    theirs = _kubeconfig(tmp_path / "theirs", "https://127.0.0.1:6442", "theirs")
    monkeypatch.setenv("KUBECONFIG", str(theirs))
    assert k8s.api_client().configuration.host == "https://127.0.0.1:6442"
    with use_settings(Settings(kubeconfig=str(mine))):
        assert k8s.api_client().configuration.host == "https://127.0.0.1:6441"
    assert os.environ["KUBECONFIG"] == str(theirs)


def test_an_entry_without_a_cluster_is_undone_only_where_the_operator_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = _kubeconfig(tmp_path / "given", "https://127.0.0.1:6443", "given")
    monkeypatch.setenv("KUBECONFIG", str(given))
    with pytest.raises(TargetMismatch, match="does not record which cluster"):
        k8s.undo_api_client(None)  # $KUBECONFIG alone is not the operator naming the cluster
    with use_settings(Settings(kubeconfig=str(given))):  # gameday rollback --kubeconfig
        assert k8s.undo_api_client(None).configuration.host == "https://127.0.0.1:6443"
    with use_settings(Settings(context="given")):  # gameday rollback --context
        assert k8s.undo_api_client(None).configuration.host == "https://127.0.0.1:6443"


def test_the_orphan_undo_dsn_is_the_commands_else_the_environments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(DSN_VAR, raising=False)
    assert scan_dsn() is None
    monkeypatch.setenv(DSN_VAR, "postgresql://env@127.0.0.1/app")
    assert scan_dsn() == "postgresql://env@127.0.0.1/app"
    with use_settings(Settings(db_dsn=DSN)):
        assert scan_dsn() == DSN
    assert os.environ[DSN_VAR] == "postgresql://env@127.0.0.1/app"


def test_use_settings_nests_and_restores() -> None:
    outer, inner = Settings(ledger=Path("/a")), Settings(ledger=Path("/b"))
    seen = []

    def failing_command() -> None:
        with use_settings(inner):
            seen.append(current_settings())
            raise RuntimeError("the command failed")

    with use_settings(outer):
        with pytest.raises(RuntimeError):
            failing_command()
        assert seen == [inner]
        assert current_settings() is outer
    assert current_settings() == Settings()


def test_a_sandbox_service_is_tagged_in_its_own_command_not_through_os_environ(
    tmp_path: Path, netns_name: str
) -> None:
    subprocess.run(["ip", "netns", "add", netns_name], check=True, timeout=10)
    before = dict(os.environ)
    prefix = netns_name.removeprefix("gdt-")
    try:
        proc = _services._spawn(netns_name, prefix, ["sleep", "30"], tmp_path / "sleep.log")
        try:
            assert dict(os.environ) == before  # the runner's environment is not how it is tagged
            assert helper.TOKEN_VAR not in os.environ
            deadline = time.monotonic() + 10  # until `ip netns exec` and `env` have exec'd sleep
            while proc.pid not in helper.find_helpers(_services.token(prefix)):
                assert time.monotonic() < deadline, "the service does not carry the sandbox's token"
                time.sleep(0.05)
            assert _services.stop_all(prefix) == 1  # and down finds it by that token
            proc.wait(timeout=10)
        finally:
            proc.kill()
            proc.wait(timeout=10)
    finally:
        subprocess.run(["ip", "netns", "delete", netns_name], check=False, timeout=10)
