"""Chaos Toolkit compatibility: what chaoslib accepts, `gameday validate` accepts.

The corpus is chaostoolkit-lib's own ``tests/fixtures/experiments.py`` (every
experiment it defines), copied unchanged into ``tests/fixtures/chaostoolkit_lib``
from https://github.com/chaostoolkit/chaostoolkit-lib at commit
72f814b492ceb71b1a0a6193de95e14a76b6c8f9, Apache-2.0 (see its README and
LICENSE). chaoslib's ``ensure_experiment_is_valid`` judges each in a child
process (``support.ctk_corpus``); ``gameday validate`` then judges the same
files. Only validation is compared: many of them call example.com or sleep.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.ctk_corpus import CORPUS_ROOT
from support.harness import ROOT, TESTS, cli_env, gameday_argv

# Where gameday is stricter than chaoslib, on purpose (docs/validation.md): name -> (line, why)
STRICTER = {
    "ExperimentWithUnexpectedArgumentsControls": (
        "controls[0]: control 'dummy': invalid: configure_control() takes no argument 'joke'",
        "a control whose arguments its configure_control cannot take is not configured, "
        "so it would not protect the run: safety controls fail closed",
    ),
}


def _env(ledger: Path) -> dict[str, str]:
    env = cli_env(ledger)
    env["PYTHONPATH"] = os.pathsep.join([str(CORPUS_ROOT), str(TESTS), str(ROOT)])
    return env


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str | None]]:
    """The fixtures written as JSON files, with chaoslib's verdict on each."""
    out = tmp_path_factory.mktemp("ctk-corpus")
    child = subprocess.run(
        [sys.executable, "-m", "support.ctk_corpus", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=_env(out / "unused.sqlite3"),
        cwd=out,
    )
    verdicts: dict[str, str | None] = json.loads(child.stdout)
    return out, verdicts


def _gameday(command: str, files: list[Path], ledger: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        gameday_argv(command, *map(str, files)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=_env(ledger),
        cwd=ledger.parent,
    )


def _validate(files: list[Path], ledger: Path) -> dict[str, list[str]]:
    """``gameday validate`` on all files at once: its refusal lines per file name."""
    result = _gameday("validate", files, ledger)
    assert "Traceback" not in result.stderr
    lines: dict[str, list[str]] = {}
    for line in result.stderr.splitlines():
        if line.startswith("invalid: "):
            name = Path(line.removeprefix("invalid: ").split(": ", 1)[0]).stem
            lines.setdefault(name, []).append(line)
    assert (result.returncode == 3) == bool(lines), result.stderr
    return lines


def test_the_corpus_is_chaostoolkits_whole_fixture_file(
    corpus: tuple[Path, dict[str, str | None]],
) -> None:
    _, verdicts = corpus
    assert len(verdicts) >= 59, sorted(verdicts)  # every ...Experiment... of the file
    accepted = [name for name, verdict in verdicts.items() if verdict is None]
    assert len(accepted) >= 45
    assert {
        "RefProbeExperiment",
        "ExperimentWithRegularRollback",
        "ExperimentWithControlsAtVariousLevels",
        "SimpleExperimentWithBackgroundActivity",
    } <= set(accepted)


def test_every_experiment_chaoslib_accepts_gameday_validate_accepts(
    corpus: tuple[Path, dict[str, str | None]],
    ledger_path: Path,
) -> None:
    out, _ = corpus
    refused = _validate(sorted((out / "accepted").glob("*.json")), ledger_path)
    assert set(refused) == set(STRICTER), refused
    for name, (expected, _why) in STRICTER.items():
        assert len(refused[name]) == 1 and expected in refused[name][0], refused[name]


def test_every_experiment_chaoslib_refuses_gameday_validate_refuses(
    corpus: tuple[Path, dict[str, str | None]],
    ledger_path: Path,
) -> None:
    out, verdicts = corpus
    refused = _validate(sorted((out / "refused").glob("*.json")), ledger_path)
    assert set(refused) == {name for name, verdict in verdicts.items() if verdict}
    # chaoslib stops at the first problem; gameday names them all, and the ref as a ref
    assert any("'path'" in line for line in refused["ExperimentWithInvalidHypoProbe"])
    assert any("tolerance" in line for line in refused["ExperimentWithInvalidHypoProbe"])
    (pizza,) = refused["MissingRefProbeExperiment"]
    assert "method[1].ref: ref 'pizza' names no activity declared" in pizza
    # chaoslib's own check crashes on this one (builtins.sum bound by keyword): one line
    (crash,) = refused["ExperimentWithTopLevelControlsAndActivityControl"]
    assert "validation crashed: TypeError" in crash


def test_run_refuses_chaoslibs_refusals_with_the_lines_validate_prints(
    corpus: tuple[Path, dict[str, str | None]],
    ledger_path: Path,
) -> None:
    out, _ = corpus
    files = sorted((out / "refused").glob("*.json"))
    validate, run = (_gameday(command, files, ledger_path) for command in ("validate", "run"))
    assert (validate.returncode, run.returncode) == (3, 3)
    invalid = [
        [line for line in r.stderr.splitlines() if line.startswith("invalid: ")]
        for r in (validate, run)
    ]
    assert invalid[0] == invalid[1] and len(invalid[0]) >= len(files)
