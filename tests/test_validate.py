"""Invalid experiments: exit 3, one line naming the file and field, nothing injected."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.harness import netns_list

from chaos_ext.ledger import Ledger

GOOD_ACTIVITY = {
    "type": "action",
    "name": "make-namespace",
    "provider": {
        "type": "python",
        "module": "support.faultkit",
        "func": "create_netns",
        "arguments": {"name": "gdt-never"},
    },
}


def _experiment(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"title": "t", "description": "d", "method": [GOOD_ACTIVITY]}
    base.update(overrides)
    return base


def _with_provider(**changes: Any) -> dict[str, Any]:
    activity = json.loads(json.dumps(GOOD_ACTIVITY))
    activity["provider"].update(changes)
    return _experiment(method=[activity])


CASES = [
    ("missing title", _experiment(title=""), "title: required"),
    ("no method", {"title": "t", "description": "d"}, "method: required"),
    ("bad type", _experiment(method=[{**GOOD_ACTIVITY, "type": "attack"}]),
     "method[0].type: must be 'action' or 'probe'"),
    ("unknown module", _with_provider(module="chaos_ext.nothing_here"),
     "method[0].provider.module: cannot import 'chaos_ext.nothing_here'"),
    ("unknown function", _with_provider(func="explode"),
     "method[0].provider.func: support.faultkit has no activity 'explode'"),
    ("wrong argument type", _with_provider(arguments={"name": 42}),
     "method[0].provider.arguments: name: expected str, got 42"),
    ("unknown argument", _with_provider(arguments={"name": "x", "colour": "red"}),
     "method[0].provider.arguments: unknown argument 'colour' (accepted: name)"),
    ("missing argument", _with_provider(arguments={}),
     "method[0].provider.arguments: missing required argument 'name'"),
    ("probe without tolerance",
     _experiment(**{"steady-state-hypothesis": {"title": "h", "probes": [
         {**GOOD_ACTIVITY, "type": "probe"}]}}),
     "steady-state-hypothesis.probes[0].tolerance: a hypothesis probe needs a tolerance"),
]  # fmt: skip


@pytest.mark.parametrize(("label", "experiment", "expected"), CASES, ids=[c[0] for c in CASES])
def test_invalid_experiment_is_one_line_and_exit_3(
    label: str, experiment: dict[str, Any], expected: str,
    write_experiment: Callable[..., Path], ledger_path: Path,
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:  # fmt: skip
    path = write_experiment(experiment)
    for command in ("validate", "run"):
        result = gameday(command, str(path))
        assert result.returncode == 3, result.stderr
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith(f"invalid: {path}: ")
        assert expected in lines[0]
        assert "Traceback" not in result.stderr
    assert "gdt-never" not in netns_list()
    assert Ledger(ledger_path).open_entries() == []


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("broken.json", '{"title": "t",\n "description": }', "line 2: invalid JSON"),
        ("broken.yaml", "title: t\nmethod: [\n", "invalid YAML"),
        ("list.json", "[1, 2]", "document: an experiment is a mapping"),
    ],
)
def test_malformed_files(
    name: str, text: str, expected: str, tmp_path: Path,
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:  # fmt: skip
    path = tmp_path / name
    path.write_text(text)
    result = gameday("validate", str(path))
    assert result.returncode == 3
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_file_and_bad_option(
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    result = gameday("validate", "nope.json")
    assert result.returncode == 3
    assert "nope.json: file: No such file or directory" in result.stderr
    assert gameday("run", "--no-such-flag", "x.json").returncode == 3


def test_valid_experiment_is_reported(
    write_experiment: Callable[..., Path], gameday: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    path = write_experiment(_experiment())
    result = gameday("validate", str(path))
    assert result.returncode == 0, result.stderr
    assert "valid:" in result.stderr
    assert "gdt-never" not in netns_list()


def test_configuration_substitution_is_not_type_checked_early(
    write_experiment: Callable[..., Path], gameday: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    path = write_experiment(
        _with_provider(arguments={"name": "${ns}"}) | {"configuration": {"ns": "x"}}
    )
    assert gameday("validate", str(path)).returncode == 0


def test_environment_secrets_are_checked_by_run_not_by_validate(
    write_experiment: Callable[..., Path], gameday: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
) -> None:  # fmt: skip
    experiment = _experiment(method=[])
    experiment["secrets"] = {"db": {"password": {"type": "env", "key": "GD_TEST_NOT_SET"}}}
    path = write_experiment(experiment)
    assert gameday("validate", str(path)).returncode == 0
    missing = gameday("run", str(path))
    assert missing.returncode == 3
    assert "secrets: Secrets make reference to an environment key" in missing.stderr
    var_file = tmp_path / "vars.json"
    var_file.write_text(json.dumps({"secrets": {"db": {"password": "from-var-file"}}}))
    given = gameday("run", "--var-file", str(var_file), str(path))
    assert given.returncode == 0, given.stderr


def test_configuration_vars_apply_to_every_experiment(
    write_experiment: Callable[..., Path], gameday: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
) -> None:  # fmt: skip
    probe = {
        "type": "probe", "name": "port-open", "tolerance": True,
        "provider": {"type": "python", "module": "support.faultkit", "func": "port_open",
                     "arguments": {"port": "${port}"}},
    }  # fmt: skip
    experiment = _experiment(method=[], configuration={"port": 1})  # nothing listens on port 1
    experiment["steady-state-hypothesis"] = {"title": "h", "probes": [probe]}
    first = write_experiment(experiment, "one.json")
    second = write_experiment(experiment, "two.json")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        result = gameday("run", "--var", f"port:int={port}", str(first), str(second))
    # chaoslib pops the vars it uses: without a copy per experiment, the second
    # one would probe port 1 and deviate
    assert result.returncode == 0, result.stderr
    for name in ("one", "two"):
        journal = json.loads((tmp_path / f"journal-{name}.json").read_text())
        assert journal["gameday"]["outcome"] == "held"


def test_substituted_arguments_are_checked_with_their_configured_values(
    write_experiment: Callable[..., Path], gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:  # fmt: skip
    experiment = _with_provider(arguments={"name": "${ns}"}) | {"configuration": {"ns": 42}}
    result = gameday("validate", str(write_experiment(experiment)))
    assert result.returncode == 3
    assert "name: expected str, got 42" in result.stderr
    # an environment value with a default is checked with the default
    experiment["configuration"] = {"ns": {"type": "env", "key": "GD_TEST_UNSET", "default": "ok"}}
    assert gameday("validate", str(write_experiment(experiment))).returncode == 0
