"""Shared CLI options are declared once (``chaos_ext.cli._options``) and mean the same
in every command that has them.

Built by introspecting the real parsers (``chaos_ext.cli.main.build_parser``):
every declaration of a shared option has the same shape and the one help text
(a command's purpose may end it), no module of the CLI declares one itself, and
every command with ``--abort-on`` reads each of its forms into the same plan.
Then the real CLI, in a subprocess: a form a command cannot take without more
(alertmanager without its URL, --alerts alone) is refused with the same
message everywhere, and ``schedule`` ships what ``run`` would read.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from chaos_ext._products.schedule.manifests import ABORT_KEY
from chaos_ext.cli import _options
from chaos_ext.cli.main import build_parser
from chaos_ext.prometheus.catalogs import builtin_abort_plans

Gameday = Callable[..., subprocess.CompletedProcess[str]]

CLI = Path(_options.__file__).parent
RULES = Path(__file__).parent / "prometheus" / "fixtures" / "rules" / "kubernetes-mixin-alerts.yaml"
KUBE_HELP = "kubeconfig of the cluster (default: $KUBECONFIG, else ~/.kube/config); "

# option -> the help text of its one declaration (a command may add "; <purpose>")
SHARED = {
    "--abort-on": _options.ABORT_ON_HELP,
    "--alerts": _options.ALERTS_HELP,
    "--var": _options.VAR_HELP,
    "--var-file": _options.VAR_FILE_HELP,
    "--kubeconfig": KUBE_HELP,
    "--context": "kubeconfig context (default: ",
}
ABORT_COMMANDS = {"run", "gate", "validate", "envelope", "schedule"}
ALERTMANAGER_REFUSAL = "watching alertmanager (--abort-on alertmanager) needs its URL"
ALERTS_REFUSAL = "--alerts needs --abort-on RULES.yaml, prometheus-alerts or alertmanager"


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every (sub)command's parser, named by its words (``sandbox run``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield " ".join((*path, name)), sub
                yield from _commands(sub, (*path, name))


def _option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    return next((a for a in parser._actions if flag in a.option_strings), None)


COMMANDS = dict(_commands(build_parser()))


def having(flag: str) -> dict[str, argparse.Action]:
    found = {name: _option(parser, flag) for name, parser in COMMANDS.items()}
    return {name: action for name, action in found.items() if action is not None}


def _shape(action: argparse.Action) -> tuple[Any, ...]:
    return (type(action).__name__, action.dest, action.metavar, action.nargs, repr(action.default))


@pytest.mark.parametrize("flag", sorted(SHARED))
def test_a_shared_option_has_one_shape_and_one_help(flag: str) -> None:
    actions = having(flag)
    assert actions, f"no command has {flag}"
    assert len({_shape(a) for a in actions.values()}) == 1, {
        name: _shape(a) for name, a in actions.items()
    }
    base = SHARED[flag]
    wrong = {
        name: a.help
        for name, a in actions.items()
        if not (
            a.help == base or (a.help or "").startswith(base if base.endswith(" ") else base + "; ")
        )
    }
    assert wrong == {}


def test_the_commands_with_abort_on() -> None:
    assert set(having("--abort-on")) == ABORT_COMMANDS
    assert set(having("--alerts")) == ABORT_COMMANDS


def test_var_file_goes_with_var_but_where_the_run_is_elsewhere() -> None:
    assert set(having("--var")) - set(having("--var-file")) == {"schedule"}
    assert set(having("--kubeconfig")) == set(having("--context"))


def _declared_flags(source: str) -> list[str]:
    """The option strings ``add_argument`` is called with in ``source``."""
    return [
        arg.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "add_argument"
        for arg in node.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
    ]


def test_no_cli_module_declares_a_shared_option_itself() -> None:
    found = {
        path.name: sorted(set(_declared_flags(path.read_text())) & set(SHARED))
        for path in CLI.glob("*.py")
        if path.name != "_options.py"
    }
    assert {name: flags for name, flags in found.items() if flags} == {}


def test_declared_flags_are_found() -> None:
    assert _declared_flags('p.add_argument("--var", action="append")\nq.add("--x")') == ["--var"]


def _forms(tmp_path: Path) -> dict[str, list[str]]:
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "conditions:\n  - probe: http-error-ratio\n    parameters: {job: api}\n"
        "    tolerance: {op: '<', threshold: 0.05}\n"
    )
    return {
        "file": ["--abort-on", str(plan)],
        "rules": ["--abort-on", str(RULES), "--alerts", "severity=critical"],
        "built-in": ["--abort-on", sorted(builtin_abort_plans())[0]],
        "prometheus-alerts": ["--abort-on", "prometheus-alerts", "--alerts", "severity=critical"],
        "alertmanager": ["--abort-on", "alertmanager"],
    }


def _read(command: str, words: list[str]) -> Any:
    """``words`` through ``command``'s own --abort-on/--alerts, read into its plan."""
    parser = argparse.ArgumentParser(add_help=False)
    for flag in ("--abort-on", "--alerts"):
        action = _option(COMMANDS[command], flag)
        assert action is not None
        parser._add_action(action)
    plan = _options.abort_plan_of(parser.parse_args(words))
    assert plan is not None
    return (
        plan.source,
        len(plan.conditions),
        len(plan.alerts.rules),
        [w.source for w in plan.alerts.firing],
    )


def test_every_command_reads_every_abort_form_into_the_same_plan(tmp_path: Path) -> None:
    for form, words in _forms(tmp_path).items():
        plans = {command: _read(command, words) for command in sorted(ABORT_COMMANDS)}
        assert len(set(map(repr, plans.values()))) == 1, (form, plans)


def test_abort_form_prefers_an_existing_file(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    assert _options.abort_form("alertmanager") == "alertmanager"
    assert _options.abort_form("edge") == "built-in"
    (tmp_path / "edge").write_text("conditions: []\n")
    assert _options.abort_form("edge") == "file"
    assert _options.abort_form("missing.yaml") == "file"


# -- the real CLI ------------------------------------------------------------------------


def _offline() -> dict[str, Any]:
    return {
        "version": "1.0.0",
        "title": "options",
        "description": "touches nothing: validation only",
        "method": [
            {
                "type": "action",
                "name": "hold-dns-tcp",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.dns.actions",
                    "func": "saturate_dnsmasq_tcp",
                    "arguments": {
                        "server": "127.0.0.1",
                        "port": 9,
                        "connections": 5,
                        "hold_seconds": 1,
                    },
                },
            }
        ],
    }


def _command_line(command: str, experiment: Path) -> list[str]:
    if command == "envelope":
        return ["envelope", str(experiment), "--vary", "hold-dns-tcp.connections=1..9", "--dry-run"]
    if command == "schedule":
        return ["schedule", str(experiment), "--cron", "@daily"]
    return [command, str(experiment)]


@pytest.mark.parametrize("command", ["validate", "run", "envelope", "schedule"])
@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["--abort-on", "alertmanager"], ALERTMANAGER_REFUSAL),
        (["--alerts", "severity=critical"], ALERTS_REFUSAL),
    ],
)
def test_a_refusal_says_the_same_in_every_command(
    gameday: Gameday,
    write_experiment: Callable[..., Path],
    ledger_path: Path,
    command: str,
    words: list[str],
    message: str,
) -> None:
    done = gameday(*_command_line(command, write_experiment(_offline())), *words)
    assert done.returncode == 3, done.stderr
    assert message in " ".join(done.stderr.split()), done.stderr
    assert not ledger_path.exists()


@pytest.mark.parametrize("command", ["validate", "envelope", "schedule"])
def test_a_built_in_plan_and_alertmanager_with_its_url_are_taken(
    gameday: Gameday, write_experiment: Callable[..., Path], command: str
) -> None:
    done = gameday(
        *_command_line(command, write_experiment(_offline())),
        "--abort-on",
        "edge",
        "--abort-on",
        "alertmanager",
        "--var",
        "alertmanager_url=http://alertmanager:9093",
    )
    assert done.returncode == 0, done.stderr


def _script(stdout: str) -> tuple[dict[str, Any], str]:
    docs = [d for d in yaml.safe_load_all(stdout) if d]
    (config_map,) = [d for d in docs if d["kind"] == "ConfigMap"]
    (cron,) = [d for d in docs if d["kind"] == "CronJob"]
    spec = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return config_map["data"], spec["containers"][0]["command"][2]


def test_schedule_ships_a_built_in_plan_and_passes_the_words_on(
    gameday: Gameday, write_experiment: Callable[..., Path]
) -> None:
    experiment = write_experiment(_offline())
    done = gameday(
        *_command_line("schedule", experiment),
        "--abort-on",
        "edge",
        "--abort-on",
        "prometheus-alerts",
        "--alerts",
        "severity=critical",
    )
    assert done.returncode == 0, done.stderr
    data, script = _script(done.stdout)
    assert data[ABORT_KEY] == builtin_abort_plans()["edge"].read_text()
    assert (
        f"--abort-on /experiments/{ABORT_KEY} --abort-on prometheus-alerts "
        "--alerts severity=critical" in script
    )


def test_schedule_refuses_a_second_plan_file(
    gameday: Gameday, write_experiment: Callable[..., Path], tmp_path: Path
) -> None:
    experiment = write_experiment(_offline())
    done = gameday(
        *_command_line("schedule", experiment), "--abort-on", "edge", "--abort-on", str(RULES)
    )
    assert done.returncode == 3
    assert "schedule ships one plan file in its ConfigMap" in " ".join(done.stderr.split())


def test_schedule_refuses_a_plan_that_reads_another_file(
    gameday: Gameday, write_experiment: Callable[..., Path], tmp_path: Path
) -> None:
    (tmp_path / "rules.yaml").write_text(RULES.read_text())
    plan = tmp_path / "plan.yaml"
    plan.write_text("alerts:\n  rules: [rules.yaml]\n  select: ['severity=critical']\n")
    experiment = write_experiment(_offline())
    assert gameday("validate", "--abort-on", str(plan), str(experiment)).returncode == 0
    done = gameday(*_command_line("schedule", experiment), "--abort-on", str(plan))
    assert done.returncode == 3
    assert "which the ConfigMap would not carry" in " ".join(done.stderr.split()), done.stderr
