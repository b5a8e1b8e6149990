"""Input that could hang or crash validation: refused at once, one line each, exit 3.

A YAML alias bomb in an activity's arguments used to validate for 30-60 s and
grow to gigabytes; a FIFO hung the command; a NaN timeout validated and the run
printed tracebacks; negative pauses validated and every run failed; non-UTF-8
and deep nesting said "crashed: UnicodeDecodeError / RecursionError"; an
activity's own check stopped at its first bad argument. The real CLI in a
subprocess, where the exit code and the time matter.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chaos_ext._runner._input import MAX_BYTES, MAX_DEPTH
from chaos_ext._runner.experiments import load_experiment
from chaos_ext.errors import ExperimentInvalid

Gameday = Callable[..., subprocess.CompletedProcess[str]]


def _lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in result.stderr and "crashed" not in result.stderr, result.stderr
    return [line for line in result.stderr.splitlines() if line.strip()]


def _refused(gameday: Gameday, path: Path, *, within: float = 5.0) -> str:
    """The one refusal line of `gameday validate PATH`, which must come within ``within`` s."""
    started = time.monotonic()
    result = gameday("validate", str(path), timeout=within + 30)
    elapsed = time.monotonic() - started
    assert result.returncode == 3, result.stdout + result.stderr
    (line,) = _lines(result)
    assert line.startswith(f"invalid: {path}: "), line
    assert elapsed < within, f"{elapsed:.1f} s"
    return line


def _alias_bomb(levels: int = 8) -> str:
    """An experiment whose add_latency ``destinations`` expand to 9**(levels+1) strings."""
    names = "abcdefghij"[:levels]
    parts = [f"&{names[0]} [{','.join('x' * 9)}]"]
    parts += [f"&{cur} [{','.join([f'*{prev}'] * 9)}]" for prev, cur in itertools.pairwise(names)]
    parts.append(f"[{','.join([f'*{names[-1]}'] * 9)}]")
    return (
        "title: t\ndescription: d\nmethod:\n- type: action\n  name: lag\n  provider:\n"
        "    type: python\n    module: chaos_ext.network.actions\n    func: add_latency\n"
        "    arguments:\n      interface: eth0\n      delay_seconds: 0.1\n"
        f"      destinations: [{','.join(parts)}]\n"
    )


def test_a_yaml_alias_bomb_in_an_activity_argument_is_refused_at_once(
    gameday: Gameday, tmp_path: Path
) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(_alias_bomb())
    assert path.stat().st_size < 520  # a few hundred bytes, 43 million strings expanded
    started = time.monotonic()
    with pytest.raises(ExperimentInvalid, match="YAML aliases expand to more than 100,000"):
        load_experiment(path)
    assert time.monotonic() - started < 0.5
    line = _refused(gameday, path, within=2.0)
    assert "line 13: YAML aliases expand to more than 100,000 values (an alias bomb?)" in line
    # a few aliases, as people write them, are fine
    path.write_text(_alias_bomb(levels=2))
    assert "destinations" in load_experiment(path)["method"][0]["provider"]["arguments"]


def test_an_alias_inside_its_own_anchor_is_refused(gameday: Gameday, tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("title: t\ndescription: d\nmethod: []\nloop: &a [1, *a]\n")
    assert "line 4: YAML alias *a is inside its own anchor" in _refused(gameday, path)


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_only_regular_files_are_read(kind: str, gameday: Gameday, tmp_path: Path) -> None:
    if kind == "fifo":
        path = tmp_path / "experiment.json"
        os.mkfifo(path)  # no writer: reading it would wait forever
        expected = "file: a FIFO (named pipe), not a regular file"
    elif kind == "device":
        path, expected = Path("/dev/zero"), "file: a character device, not a regular file"
    else:
        path, expected = tmp_path, "file: a directory: give the experiment files in it"
    assert expected in _refused(gameday, path, within=5.0)


def test_a_file_larger_than_the_limit_is_not_read(gameday: Gameday, tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    padding = "x" * (MAX_BYTES + 1)
    path.write_text(json.dumps({"title": "t", "description": padding, "method": []}))
    assert "file: larger than 4 MiB: not an experiment file" in _refused(gameday, path)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("python-recursion.json", "[" * 100_000 + "]" * 100_000),
        ("past-the-limit.json", "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)),
        ("past-the-limit.yaml", "a:\n" + "".join(f"{' ' * i}- \n" for i in range(MAX_DEPTH + 1))),
    ],
)
def test_deep_nesting_is_refused_with_the_limit(
    name: str, text: str, gameday: Gameday, tmp_path: Path
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert f"nested deeper than {MAX_DEPTH} levels of lists and objects" in _refused(gameday, path)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            b'{"title": "caf\xe9",\n "description": "d", "method": []}',
            "encoding: not UTF-8: byte 0xe9 on line 1 (offset 14) is not valid UTF-8; "
            "save the file as UTF-8",
        ),
        (
            '{"title": "t", "description": "d", "method": []}'.encode("utf-16"),
            "encoding: UTF-16 text; save the file as UTF-8",
        ),
    ],
)
def test_an_encoding_problem_is_named(
    data: bytes, expected: str, gameday: Gameday, tmp_path: Path
) -> None:
    path = tmp_path / "experiment.json"
    path.write_bytes(data)
    assert expected in _refused(gameday, path)
    path.write_bytes(b"\xef\xbb\xbf" + b'{"title": "t", "description": "d", "method": []}')
    assert gameday("validate", str(path)).returncode == 0  # a UTF-8 BOM is fine


def _process(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "action",
        "name": name,
        "provider": {"type": "process", "path": "true"},
        **extra,
    }


def test_nan_infinite_and_negative_durations_are_refused_at_validation(
    gameday: Gameday, tmp_path: Path
) -> None:
    path = tmp_path / "durations.json"
    method = [
        _process("nan-timeout", timeout=float("nan")),
        _process("negative-pause", pauses={"after": -1, "before": "${pause}"}),
        _process("infinite-timeout", timeout=float("inf")),
    ]
    experiment = {"title": "t", "description": "d", "configuration": {"pause": -3}}
    path.write_text(json.dumps({**experiment, "method": method}))  # NaN, Infinity: Python's JSON
    expected = [
        "action 'nan-timeout' at method[0].timeout: NaN is not a number of seconds",
        "action 'negative-pause' at method[1].pauses.before: -3 is negative",
        "action 'negative-pause' at method[1].pauses.after: -1 is negative",
        "action 'infinite-timeout' at method[2].timeout: inf is not a finite number of seconds",
    ]
    for command in ("validate", "run"):
        result = gameday(command, str(path))
        assert result.returncode == 3, result.stderr
        lines = _lines(result)
        assert len(lines) == len(expected), result.stderr
        for line, text in zip(lines, expected, strict=True):
            assert text in line, line
    assert not list(tmp_path.glob("journal*.json"))  # refused before anything ran
    path.write_text(json.dumps({**experiment, "configuration": {"pause": 0.5}, "method": []}))
    assert gameday("validate", str(path)).returncode == 0


def test_an_activity_with_six_bad_arguments_gets_six_problems(
    gameday: Gameday, tmp_path: Path
) -> None:
    arguments = {
        "interface": "eth 0!",  # not a name
        "delay_seconds": 100,  # above 60
        "jitter_seconds": "x",  # not a number
        "loss": 200,  # above 100
        "destinations": ["10.0.0.0/8", "nowhere"],  # not a CIDR
        "ports": [0],  # not a port
    }
    provider = {
        "type": "python",
        "module": "chaos_ext.network.actions",
        "func": "add_latency",
        "arguments": arguments,
    }
    method = [{"type": "action", "name": "lag", "provider": provider}]
    path = tmp_path / "six.json"
    path.write_text(json.dumps({"title": "t", "description": "d", "method": method}))
    lines = _lines(gameday("validate", str(path)))
    head = f"invalid: {path}: action 'lag' at method[0].provider.arguments: "
    assert [line.removeprefix(head).split(":")[0] for line in lines] == [
        "jitter_seconds",
        "interface",
        "delay_seconds",
        "loss",
        "destinations",
        "ports",
    ], lines
    assert "destinations: 'nowhere' is not a CIDR" in lines[4]
