"""Every file, every problem; one decision for validate and run; refs in every phase."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_validate import CASES

from chaos_ext._core.ledger import Ledger

Gameday = Callable[..., subprocess.CompletedProcess[str]]


def _process(kind: str, name: str, path: str, *arguments: str, **extra: Any) -> dict[str, Any]:
    provider = {"type": "process", "path": path, "arguments": list(arguments)}
    return {"type": kind, "name": name, "provider": provider, **extra}


def _experiment(**parts: Any) -> dict[str, Any]:
    return {"title": "t", "description": "d", "method": [], **parts}


# builtins.sum takes its iterable positionally only: chaoslib's binding check raises TypeError
SUM = {"type": "python", "module": "builtins", "func": "sum", "arguments": {"iterable": [1, 2]}}
CRASH = _experiment(method=[{"type": "action", "name": "add", "provider": SUM}])
# three problems: a missing tolerance, the missing argument it used to hide, a dangling ref
BAD = _experiment(
    **{
        "steady-state-hypothesis": {
            "title": "h",
            "probes": [
                {
                    "type": "probe",
                    "name": "here",
                    "provider": {"type": "python", "module": "os.path", "func": "exists"},
                }
            ],
        }
    },
    rollbacks=[{"ref": "nowhere"}],
)
REFS = _experiment(
    **{
        "steady-state-hypothesis": {
            "title": "h",
            "probes": [
                _process("probe", "alive", "true", tolerance=0),
                {"ref": "alive", "tolerance": 0},
            ],
        }
    },
    method=[_process("action", "say", "echo", "rolled-back"), {"ref": "alive"}],
    rollbacks=[{"ref": "say"}],
)
INVALID = {
    **{label.replace(" ", "-"): experiment for label, experiment, _ in CASES},
    "crash": CRASH,
    "bad": BAD,
    "unset-env": _experiment(configuration={"k": {"type": "env", "key": "GD_TEST_UNSET_29"}}),
    "bad-settle": _experiment(extensions=[{"name": "gameday", "settle_seconds": "soon"}]),
    "ref-in-hypothesis": _experiment(
        **{"steady-state-hypothesis": {"title": "h", "probes": [{"ref": "gone", "tolerance": 0}]}}
    ),
}


def _lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def test_a_crash_is_one_line_for_its_file_and_the_other_files_are_still_validated(
    write_experiment: Callable[..., Path], gameday: Gameday
) -> None:
    good = write_experiment(_experiment(), "good.json")
    crash = write_experiment(CRASH, "crash.json")
    bad = write_experiment(BAD, "bad.json")
    result = gameday("validate", str(good), str(crash), str(bad))
    assert result.returncode == 3, result.stderr
    lines = _lines(result)
    assert "Traceback" not in result.stderr
    assert not [line for line in lines if "good.json" in line]
    (crashed,) = [line for line in lines if line.startswith(f"invalid: {crash}: ")]
    assert "TypeError: 'iterable' parameter is positional only" in crashed
    assert [line.removeprefix(f"invalid: {bad}: ") for line in lines if str(bad) in line] == [
        "probe 'here' at steady-state-hypothesis.probes[0].tolerance: "
        "a hypothesis probe needs a tolerance",
        "probe 'here' at steady-state-hypothesis.probes[0].provider.arguments: "
        "missing required argument 'path'",
        "rollbacks[0].ref: ref 'nowhere' names no activity declared in the experiment's "
        "hypothesis or method (declared: 'here')",
    ]
    assert len(lines) == 4, lines


@pytest.mark.parametrize(
    "options",
    [[], ["--abort-on", "alertmanager"], ["--alerts", "severity=critical"]],
    ids=["plain", "alertmanager-without-url", "alerts-without-abort-on"],
)
def test_validate_and_run_refuse_every_invalid_fixture_with_the_same_lines(
    options: list[str],
    write_experiment: Callable[..., Path],
    gameday: Gameday,
    ledger_path: Path,
) -> None:
    paths = [str(write_experiment(e, f"{name}.json")) for name, e in INVALID.items()]
    validate, run = (gameday(command, *options, *paths) for command in ("validate", "run"))
    assert (validate.returncode, run.returncode) == (3, 3), run.stderr
    assert _lines(validate) == _lines(run)
    refused = {line.split(": ", 2)[1] for line in _lines(validate) if line.startswith("invalid: ")}
    assert refused >= set(paths), set(paths) - refused  # every file named
    assert all(line.startswith("invalid: ") for line in _lines(run)), run.stderr
    assert Ledger(ledger_path).open_entries() == []


def test_dangling_refs_are_named_in_every_phase(
    write_experiment: Callable[..., Path], gameday: Gameday
) -> None:
    experiment = _experiment(
        **{"steady-state-hypothesis": {"title": "h", "probes": [{"ref": "a", "tolerance": 0}]}},
        method=[{"ref": "b"}],
        rollbacks=[{"ref": "c"}, {"ref": ""}],
    )
    result = gameday("validate", str(write_experiment(experiment)))
    assert result.returncode == 3
    wheres = [line.split(": ")[2] for line in _lines(result)]
    assert wheres == [
        "steady-state-hypothesis.probes[0].ref",
        "method[0].ref",
        "rollbacks[0].ref",
        "rollbacks[1].ref",
    ]
    assert "ref 'c' names no activity declared" in _lines(result)[2]
    assert "a ref is the name of an activity, got ''" in _lines(result)[3]


def test_a_rollback_ref_validates_and_runs_end_to_end(
    write_experiment: Callable[..., Path], gameday: Gameday, tmp_path: Path
) -> None:
    """Chaos Toolkit's reference shape: a rollback that names a method action by ``ref``
    (and refs in the hypothesis and method), run through chaoslib as `chaos run` would."""
    path = write_experiment(REFS)
    assert gameday("validate", str(path)).returncode == 0
    journal = tmp_path / "journal.json"
    result = gameday("run", "--journal", str(journal), str(path))
    assert result.returncode == 0, result.stderr
    record = json.loads(journal.read_text())
    assert [r["activity"]["name"] for r in record["run"]] == ["say", "alive"]
    (rollback,) = record["rollbacks"]
    assert rollback["activity"]["name"] == "say" and rollback["status"] == "succeeded"
    assert rollback["output"]["stdout"] == "rolled-back\n"
    probes = record["steady_states"]["before"]["probes"]
    assert [p["activity"]["name"] for p in probes] == ["alive", "alive"]


def test_an_alertmanager_url_given_only_with_var_is_admitted(
    write_experiment: Callable[..., Path], gameday: Gameday
) -> None:
    """The documented command: the watch reads --var itself (the run then talks to that
    Alertmanager: tests/prometheus/test_prometheus_abort_vars.py), so validate passes it."""
    path = write_experiment(_experiment())
    options = ["--abort-on", "alertmanager", "--var", "alertmanager_url=http://127.0.0.1:9"]
    validate = gameday("validate", *options, str(path))
    assert validate.returncode == 0, validate.stderr
    refused = gameday("validate", "--abort-on", "alertmanager", str(path))
    assert refused.returncode == 3
    (line,) = _lines(refused)
    assert line.startswith(f"invalid: {path}: configuration.alertmanager_url: ")
    assert "--var alertmanager_url=" in line


def test_a_failed_rollback_ref_is_retried_from_the_journal(
    write_experiment: Callable[..., Path], gameday: Gameday, tmp_path: Path
) -> None:
    """`gameday rollback --journal` finds a ``{"ref": ...}`` rollback that failed: the ref
    is resolved to the activity it names, so it is retried like any other."""
    folder = tmp_path / "made-by-the-method"
    mkdir = {
        "type": "action",
        "name": "make-folder",
        "provider": {
            "type": "python",
            "module": "os",
            "func": "mkdir",
            "arguments": {"path": str(folder)},
        },
    }
    path = write_experiment(_experiment(method=[mkdir], rollbacks=[{"ref": "make-folder"}]))
    run = gameday("run", "--journal", "journal.json", str(path))
    assert run.returncode == 2, run.stderr  # the rollback failed: the folder exists
    folder.rmdir()  # the operator makes the rollback possible again
    retry = gameday("rollback", "--journal", "journal.json")
    assert retry.returncode == 0, retry.stderr
    assert "make-folder succeeded" in retry.stderr and folder.is_dir()
    again = gameday("rollback", "--journal", "journal.json")
    assert "no rollback left to retry" in again.stderr
