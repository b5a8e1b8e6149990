"""Invalid experiments: exit 3, one line naming the file and field, nothing injected."""

from __future__ import annotations

import json
import shlex
import shutil
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.harness import cli_env, gameday_argv, netns_list

from chaos_ext._core.ledger import Ledger

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
    (
        "bad type",
        _experiment(method=[{**GOOD_ACTIVITY, "type": "attack"}]),
        "method[0].type: must be 'action' or 'probe'",
    ),
    (
        "unknown module",
        _with_provider(module="chaos_ext.nothing_here"),
        "method[0].provider.module: cannot import 'chaos_ext.nothing_here'",
    ),
    (
        "unknown function",
        _with_provider(func="explode"),
        "method[0].provider.func: support.faultkit has no activity 'explode'",
    ),
    (
        "wrong argument type",
        _with_provider(arguments={"name": 42}),
        "method[0].provider.arguments: name: expected str, got 42",
    ),
    (
        "unknown argument",
        _with_provider(arguments={"name": "x", "colour": "red"}),
        "method[0].provider.arguments: unknown argument 'colour' (accepted: name)",
    ),
    (
        "missing argument",
        _with_provider(arguments={}),
        "method[0].provider.arguments: missing required argument 'name'",
    ),
    (
        "probe without tolerance",
        _experiment(
            **{
                "steady-state-hypothesis": {
                    "title": "h",
                    "probes": [{**GOOD_ACTIVITY, "type": "probe"}],
                }
            }
        ),
        "steady-state-hypothesis.probes[0].tolerance: a hypothesis probe needs a tolerance",
    ),
]


@pytest.mark.parametrize(("label", "experiment", "expected"), CASES, ids=[c[0] for c in CASES])
def test_invalid_experiment_is_one_line_and_exit_3(
    label: str,
    experiment: dict[str, Any],
    expected: str,
    write_experiment: Callable[..., Path],
    ledger_path: Path,
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
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
    name: str,
    text: str,
    expected: str,
    tmp_path: Path,
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
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


def test_environment_configuration_not_set_is_refused_by_validate_as_by_run(
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
) -> None:
    """As `chaos validate` (chaoslib resolves it): validate refuses what run refuses,
    with the same line, and both accept the value given with --var-file or --var."""
    experiment = _experiment(method=[])
    experiment["configuration"] = {"password": {"type": "env", "key": "GD_TEST_NOT_SET"}}
    path = write_experiment(experiment)
    refused = [gameday(command, str(path)) for command in ("validate", "run")]
    assert [r.returncode for r in refused] == [3, 3]
    assert refused[0].stderr == refused[1].stderr
    expected = "configuration: Configuration makes reference to an environment key that does not"
    assert refused[0].stderr.startswith(f"invalid: {path}: {expected}"), refused[0].stderr
    assert len(refused[0].stderr.splitlines()) == 1
    var_file = tmp_path / "vars.json"
    var_file.write_text(json.dumps({"configuration": {"password": "x"}}))
    for command in ("validate", "run"):
        accepted = gameday(command, "--var-file", str(var_file), str(path))
        assert accepted.returncode == 0, accepted.stderr
    assert gameday("validate", "--var", "password=x", str(path)).returncode == 0


def test_environment_secrets_are_checked_by_run_not_by_validate(
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
) -> None:
    """The one input validate does not resolve (docs/validation.md): secrets are often set
    only where the run happens. Their shape is checked; given with --var-file, they are."""
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
    experiment["secrets"] = {"db": "not a mapping"}
    shape = gameday("validate", str(write_experiment(experiment)))
    assert shape.returncode == 3 and "secrets: a mapping of targets" in shape.stderr


def test_configuration_vars_apply_to_every_experiment(
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
) -> None:
    probe = {
        "type": "probe",
        "name": "port-open",
        "tolerance": True,
        "provider": {
            "type": "python",
            "module": "support.faultkit",
            "func": "port_open",
            "arguments": {"port": "${port}"},
        },
    }
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
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    experiment = _with_provider(arguments={"name": "${ns}"}) | {"configuration": {"ns": 42}}
    result = gameday("validate", str(write_experiment(experiment)))
    assert result.returncode == 3
    assert "name: expected str, got 42" in result.stderr
    # an environment value with a default is checked with the default
    experiment["configuration"] = {"ns": {"type": "env", "key": "GD_TEST_UNSET", "default": "ok"}}
    assert gameday("validate", str(write_experiment(experiment))).returncode == 0


def _probe(label: str, module: str, func: str, **arguments: Any) -> dict[str, Any]:
    return {
        "type": "probe",
        "name": label,
        "tolerance": True,
        "provider": {"type": "python", "module": module, "func": func, "arguments": arguments},
    }


def _hypothesis(*probes: dict[str, Any]) -> dict[str, Any]:
    return {"title": "steady", "probes": list(probes)}


def _problems(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def test_every_problem_of_every_file_is_one_line(
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    three = _with_provider(arguments={"name": 42})  # a wrong type ...
    three["title"] = ""  # ... a missing title ...
    three["rollbacks"] = [{**GOOD_ACTIVITY, "type": "attack"}]  # ... and a bad activity type
    one = _with_provider(module="chaos_ext.nothing_here")
    first, second = write_experiment(three, "three.json"), write_experiment(one, "one.json")
    result = gameday("validate", str(first), str(second))
    assert result.returncode == 3
    lines = _problems(result)
    assert len(lines) == 4, result.stderr
    assert all(line.startswith("invalid: ") for line in lines)
    assert sum(line.startswith(f"invalid: {first}: ") for line in lines) == 3
    assert f"invalid: {first}: title: required" in lines[0]
    assert "action 'make-namespace' at method[0].provider.arguments: name: expected str" in lines[1]
    assert "at rollbacks[0].type: must be 'action' or 'probe', got 'attack'" in lines[2]
    assert lines[3].startswith(f"invalid: {second}: action 'make-namespace' at method[0]")


def test_a_promql_syntax_error_names_the_probe_and_the_parser_error(
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    probe = _probe(
        "error-rate", "chaos_ext.prometheus.probes", "query_value", expr="sum(rate(x[5m]"
    )
    path = write_experiment(_experiment(**{"steady-state-hypothesis": _hypothesis(probe)}))
    result = gameday("validate", str(path))
    assert result.returncode == 3
    (line,) = _problems(result)
    assert line == (
        f"invalid: {path}: probe 'error-rate' at steady-state-hypothesis.probes[0]"
        ".provider.arguments: expr: invalid PromQL 'sum(rate(x[5m]': unclosed left parenthesis"
        + (" (at char 15, promtool)" if shutil.which("promtool") else " (offline parser)")
    )


def test_promql_is_checked_in_substituted_values_catalog_entries_and_third_party_probes(
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
) -> None:
    # chaostoolkit-prometheus' README probes (github.com/chaostoolkit-incubator/
    # chaostoolkit-prometheus, README.md at 164d1b937595c3f125c2bf4d14ae917abfb90334,
    # Apache-2.0): as published they validate; with the query broken they do not.
    readme = _probe(
        "fetch-cpu-just-2mn-ago",
        "chaosprometheus.probes",
        "query",
        query="process_cpu_seconds_total{job='websvc'}",
        when="2 minutes ago",
    )
    interval = _probe(
        "fetch-cpu-over-interval",
        "chaosprometheus.probes",
        "query_interval",
        query="process_cpu_seconds_total{job='websvc'}",
        start="2 minutes ago",
        end="now",
        step=5,
    )
    ours = _probe("p99", "chaos_ext.prometheus.probes", "query_value", expr="${p99_query}")
    experiment = _experiment(**{"steady-state-hypothesis": _hypothesis(readme, interval, ours)})
    experiment["configuration"] = {"p99_query": "histogram_quantile(0.99, rate(x_bucket[5m]))"}
    assert gameday("validate", str(write_experiment(experiment))).returncode == 0
    readme["provider"]["arguments"]["query"] = "process_cpu_seconds_total{job='websvc'"
    experiment["configuration"]["p99_query"] = "histogram_quantile(0.99 rate(x_bucket[5m]))"
    result = gameday("validate", str(write_experiment(experiment)))
    assert result.returncode == 3
    first, second = _problems(result)
    assert "probe 'fetch-cpu-just-2mn-ago' at" in first and "query: invalid PromQL" in first
    assert "probe 'p99' at" in second and "expr: invalid PromQL 'histogram_quantile(0.99 " in second
    # an environment value that is not set is refused, as `gameday run` and `chaos validate`
    # refuse it; given with --var, it is checked like any other
    experiment["configuration"]["p99_query"] = {"type": "env", "key": "GD_TEST_UNSET_QUERY"}
    readme["provider"]["arguments"]["query"] = "up"
    unset = gameday("validate", str(write_experiment(experiment)))
    assert unset.returncode == 3 and "GD_TEST_UNSET_QUERY" in unset.stderr
    given = gameday("validate", "--var", "p99_query=up", str(write_experiment(experiment)))
    assert given.returncode == 0, given.stderr
    # a catalog file whose template is not PromQL is refused wherever it is used
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        "probes:\n  broken-ratio:\n    promql: sum(rate(x_total[${window}])\n"
        "    parameters: {window: {default: 5m, kind: duration}}\n"
        "    tolerance: {op: '<', threshold: 1}\n"
    )
    uses = _probe("ratio", "chaos_ext.prometheus.probes", "catalog_probe", name="http-error-ratio")
    path = write_experiment(_experiment(**{"steady-state-hypothesis": _hypothesis(uses)}))
    env = {"GAMEDAY_PROBE_CATALOG": str(catalog)}
    result = subprocess.run(
        gameday_argv("validate", str(path)),
        capture_output=True,
        text=True,
        timeout=120,
        env={**cli_env(tmp_path / "l.sqlite"), **env},
        check=False,
    )
    assert result.returncode == 3
    (line,) = _problems(result)
    assert f"{catalog}: probe broken-ratio: promql: invalid PromQL" in line


def test_problems_stay_on_one_line_in_a_pipe_and_colour_follows_no_color(
    write_experiment: Callable[..., Path],
    ledger_path: Path,
    tmp_path: Path,
) -> None:
    """`gameday validate BAD.json 2>&1 | cat` in an 80-column CI log: one line per problem."""
    bad = _with_provider(arguments={"name": "x" * 150, "colour": "a-rather-long-value"})
    bad["title"] = ""
    path = write_experiment(bad, "BAD.json")
    env = {**cli_env(ledger_path), "COLUMNS": "80"}
    env.pop("NO_COLOR", None)
    command = [*gameday_argv("validate", str(path))]

    def piped(*extra: str, **more_env: str) -> str:
        shell = " ".join(shlex.quote(a) for a in [*command[:-2], *extra, *command[-2:]])
        done = subprocess.run(
            ["bash", "-c", f"{shell} 2>&1 | cat"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**env, **more_env},
            cwd=tmp_path,
            check=False,
        )
        return done.stdout

    out = piped()
    lines = out.splitlines()
    assert len(lines) == 2, out
    assert all(line.startswith(f"invalid: {path}: ") for line in lines)
    assert max(len(line) for line in lines) > 80  # they would have wrapped
    assert "\x1b[" not in out
    # FORCE_COLOR asks rich for colour off a terminal; NO_COLOR / --no-color win
    assert "\x1b[" in piped(FORCE_COLOR="1")
    assert "\x1b[" not in piped(FORCE_COLOR="1", NO_COLOR="1")
    assert "\x1b[" not in piped("--no-color", FORCE_COLOR="1")


def test_a_rule_file_whose_promql_does_not_parse_is_refused(
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
) -> None:
    """The real CoreDNS mixin rules (tests/prometheus/fixtures/rules, Apache-2.0) validate;
    the same file with one expression cut short does not, and the line names the alert."""
    fixture = Path(__file__).parent / "prometheus" / "fixtures" / "rules"
    real = fixture / "coredns-mixin-alerts.yaml"
    path = write_experiment(_experiment())
    assert gameday("validate", "--abort-on", str(real), str(path)).returncode == 0
    broken = tmp_path / "coredns-broken.yaml"
    text = real.read_text()
    assert 'absent(up{job="kube-dns"} == 1)' in text
    broken.write_text(
        text.replace('absent(up{job="kube-dns"} == 1)', 'absent(up{job="kube-dns"} == 1')
    )
    result = gameday("validate", "--abort-on", str(broken), str(path))
    assert result.returncode == 3
    (line,) = [x for x in _problems(result) if x.startswith("invalid:")]
    assert "(CoreDNSDown): expr: invalid PromQL" in line and "unclosed left parenthesis" in line


def test_a_control_argument_its_functions_do_not_take_is_refused(
    write_experiment: Callable[..., Path],
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    control = {
        "name": "strict",
        "provider": {
            "type": "python",
            "module": "support.strictcontrol",
            "arguments": {"level": "debug"},
        },
    }
    experiment = _experiment(controls=[control])
    assert gameday("validate", str(write_experiment(experiment))).returncode == 0
    control["provider"]["arguments"] = {"level": "debug", "colour": "red"}
    result = gameday("validate", str(write_experiment(experiment)))
    assert result.returncode == 3
    (line,) = _problems(result)
    assert line.endswith(
        "controls[0]: control 'strict': invalid: configure_control() takes no argument "
        "'colour' (it takes level)"
    )


def test_a_table_in_a_pipe_keeps_its_columns(ledger_path: Path, tmp_path: Path) -> None:
    """`gameday catalog | cat` in an 80-column CI log: one line per row, nothing folded."""
    env = {**cli_env(ledger_path), "COLUMNS": "80"}
    listing = subprocess.run(
        gameday_argv("catalog", "--json"),
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
        check=True,
    )
    probes = json.loads(listing.stdout)["probes"]
    shell = " ".join(shlex.quote(a) for a in gameday_argv("catalog"))
    table = subprocess.run(
        ["bash", "-c", f"{shell} | cat"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
        check=True,
    ).stdout
    rows = [line for line in table.splitlines() if line.startswith("│")]
    assert len(rows) == len(probes)  # a squeezed column would fold rows onto more lines
    for row, probe in zip(rows, probes, strict=True):
        assert probe["name"] in row and probe["description"] in row
    assert max(len(line) for line in table.splitlines()) > 80
