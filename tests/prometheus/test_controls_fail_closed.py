"""Safety controls fail closed: a control that cannot be imported, configured or started
stops the run before anything is injected (exit 3, one line naming the control).

"Nothing injected" is checked twice: the fault ledger stays empty, and the target
itself (a real HTTP server that counts every request it receives; the experiment's
hypothesis probes it and its method drives load at it) saw no request at all.
The positive controls (a valid plan; --allow-missing-controls) show the same
experiment does reach the target when it runs.

The safeguard control block is the example of chaostoolkit-addons' documentation
(https://github.com/chaostoolkit/chaostoolkit-addons, chaosaddons/controls/safeguards.py,
commit 0022b7c71856f455a03ed1de6e4c81df035ad5ff, Apache-2.0), reduced to one probe;
chaostoolkit-addons is not installed here, as on a machine that forgot it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.harness import cli_env
from support.servers import http_target
from support.servers.http_target import HttpTarget

from chaos_ext._core.ledger import Ledger
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer, free_port

Gameday = Callable[..., subprocess.CompletedProcess[str]]
CHAOS = Path(sys.executable).with_name("chaos")

SAFEGUARD = {
    "name": "safeguard",
    "provider": {
        "type": "python",
        "module": "chaosaddons.controls.safeguards",
        "arguments": {
            "probes": [
                {
                    "name": "safeguard_1",
                    "type": "probe",
                    "provider": {"type": "python", "module": "mymodule", "func": "checkstuff"},
                    "background": True,
                    "tolerance": True,
                }
            ]
        },
    },
}
STEADY_PLAN = {
    "interval_seconds": 1,
    "conditions": [
        {"name": "always-steady", "promql": "vector(0)", "tolerance": {"op": "<", "threshold": 1}},
    ],
}


def _abort_control(plan: str) -> dict[str, Any]:
    return {
        "name": "stop-on-errors",
        "provider": {
            "type": "python",
            "module": "chaos_ext.controls.abort",
            "arguments": {"plan": plan},
        },
    }


def _experiment(
    target: HttpTarget, prom_url: str, controls: list[dict[str, Any]]
) -> dict[str, Any]:
    def py(kind: str, name: str, module: str, func: str, **arguments: Any) -> dict[str, Any]:
        return {
            "type": kind,
            "name": name,
            "provider": {"type": "python", "module": module, "func": func, "arguments": arguments},
        }

    ready = py("probe", "target-ready", "chaos_ext.db.probes", "http_readiness", url=target.url)
    return {
        "title": "load the target under a safety control",
        "description": "must not touch the target when a control is not ready",
        "configuration": {"prometheus_url": prom_url},
        "controls": controls,
        "steady-state-hypothesis": {"title": "ready", "probes": [{**ready, "tolerance": True}]},
        "method": [
            py(
                "action",
                "load",
                "chaos_ext.load.actions",
                "drive_http_load",
                urls=[target.url],
                rate=10,
                duration_seconds=2,
                wait=True,
            )
        ],
        "rollbacks": [py("action", "stop-load", "chaos_ext.load.actions", "stop_http_load")],
    }


@pytest.fixture
def target() -> Iterator[HttpTarget]:
    with http_target.start() as server:
        yield server


@pytest.fixture
def experiments_dir(tmp_path: Path) -> Path:
    """Experiments live below the directory gameday is started from (tmp_path)."""
    folder = tmp_path / "experiments"
    (folder / "plans").mkdir(parents=True)
    (folder / "plans" / "steady.yaml").write_text(yaml.safe_dump(STEADY_PLAN))
    typo = {
        "name": "errors",
        "promql": "sum(rate(errors_total[1m]",
        "tolerance": {"op": "<", "threshold": 1},
    }
    (folder / "plans" / "typo.yaml").write_text(yaml.safe_dump({"conditions": [typo]}))
    return folder


def _write(folder: Path, experiment: dict[str, Any], name: str = "experiment.json") -> Path:
    path = folder / name
    path.write_text(json.dumps(experiment, indent=2))
    return path


def _assert_untouched(target: HttpTarget, ledger_path: Path) -> None:
    assert target.stats()["requests"] == 0
    assert not ledger_path.exists() or Ledger(ledger_path).history() == []


def _problem_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("invalid: ")]


@pytest.mark.parametrize(
    ("label", "control", "expected"),
    [
        (
            "missing plan",
            _abort_control("plans/missing.yaml"),
            "control 'stop-on-errors': invalid: abort plan ",
        ),
        (
            "invalid plan",
            _abort_control("plans/typo.yaml"),
            "invalid PromQL 'sum(rate(errors_total[1m]': unclosed left parenthesis",
        ),
        (
            "unimportable control",
            SAFEGUARD,
            "control 'safeguard': cannot import 'chaosaddons.controls.safeguards': "
            "No module named 'chaosaddons'",
        ),
    ],
)
def test_validate_and_run_refuse_and_nothing_is_injected(
    label: str,
    control: dict[str, Any],
    expected: str,
    target: HttpTarget,
    prom: PrometheusServer,
    experiments_dir: Path,
    ledger_path: Path,
    gameday: Gameday,
) -> None:
    path = _write(experiments_dir, _experiment(target, prom.url, [control]))
    junit = str(experiments_dir / "junit.xml")
    for command in (["validate"], ["run"], ["gate", "--junit", junit]):
        result = gameday(*command, str(path))
        assert result.returncode == 3, (command, result.stderr)
        (line,) = _problem_lines(result)
        assert line.startswith(f"invalid: {path}: controls[0]: "), line
        assert expected in line, line
        assert "Traceback" not in result.stderr
    if label == "missing plan":
        assert f"abort plan {experiments_dir / 'plans' / 'missing.yaml'}: no such file" in line
    _assert_untouched(target, ledger_path)
    assert not (experiments_dir.parent / "journal-experiment.json").exists()  # nothing ran


def test_a_control_of_the_settings_is_checked_too(
    target: HttpTarget,
    prom: PrometheusServer,
    experiments_dir: Path,
    ledger_path: Path,
    gameday: Gameday,
    tmp_path: Path,
) -> None:
    settings = tmp_path / "settings.yaml"
    settings.write_text(
        yaml.safe_dump({"controls": {"safeguard": {"provider": SAFEGUARD["provider"]}}})
    )
    path = _write(experiments_dir, _experiment(target, prom.url, []))
    for command in ("validate", "run"):
        result = gameday(command, "--settings", str(settings), str(path))
        assert result.returncode == 3, result.stderr
        (line,) = _problem_lines(result)
        assert line.startswith(f"invalid: {settings}: controls.safeguard: control 'safeguard'")
    settings.write_text("controls: [\n")  # chaoslib would log it and run without settings
    result = gameday("run", "--settings", str(settings), str(path))
    assert result.returncode == 3 and "invalid YAML" in result.stderr
    _assert_untouched(target, ledger_path)


def test_allow_missing_controls_runs_unprotected_and_says_so(
    target: HttpTarget,
    prom: PrometheusServer,
    experiments_dir: Path,
    ledger_path: Path,
    gameday: Gameday,
) -> None:
    path = _write(experiments_dir, _experiment(target, prom.url, [SAFEGUARD]))
    result = gameday("run", "--allow-missing-controls", str(path))
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    warning = [line for line in lines if line.startswith("⚠ --allow-missing-controls")]
    assert len(warning) == 1 and "NOT protected" in warning[0] and "safeguard" in warning[0]
    recorded = [line for line in lines if "ran WITHOUT a safety control" in line]
    assert len(recorded) == 1 and "safeguard" in recorded[0]  # the verdict says it too
    assert target.stats()["requests"] >= 10  # the load ran: the refusals above are real
    assert [e.kind for e in Ledger(ledger_path).history()] == ["http-load"]


def test_a_valid_plan_is_found_from_the_experiment_directory(
    target: HttpTarget,
    prom: PrometheusServer,
    experiments_dir: Path,
    ledger_path: Path,
    gameday: Gameday,
    tmp_path: Path,
) -> None:
    """gameday starts in tmp_path; "plans/steady.yaml" only exists next to the experiment."""
    assert not (tmp_path / "plans").exists()
    path = _write(
        experiments_dir, _experiment(target, prom.url, [_abort_control("plans/steady.yaml")])
    )
    assert gameday("validate", str(path)).returncode == 0
    result = gameday("run", "--journal", str(tmp_path / "journal.json"), str(path))
    assert result.returncode == 0, result.stderr
    journal = json.loads((tmp_path / "journal.json").read_text())
    watch = journal["gameday"]["abort"]
    assert watch["plan"] == str(experiments_dir / "plans" / "steady.yaml")
    assert watch["checks"] >= 1 and watch["fired"] is None
    assert target.stats()["requests"] >= 10


@pytest.mark.parametrize("how", ["control", "--abort-on"])
def test_prometheus_not_answering_when_the_watch_starts_refuses_the_run(
    how: str,
    target: HttpTarget,
    experiments_dir: Path,
    ledger_path: Path,
    gameday: Gameday,
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    controls = [_abort_control("plans/steady.yaml")] if how == "control" else []
    path = _write(experiments_dir, _experiment(target, dead, controls))
    extra = (
        ["--abort-on", str(experiments_dir / "plans" / "steady.yaml")] if how != "control" else []
    )
    assert gameday("validate", str(path)).returncode == 0  # validate contacts nothing
    result = gameday("run", *extra, str(path))
    assert result.returncode == 3, result.stderr
    refusal = [line for line in result.stderr.splitlines() if "refused:" in line]
    assert len(refusal) == 1, result.stderr
    assert "Prometheus does not answer" in refusal[0] and dead in refusal[0]
    if how == "control":
        assert "control 'stop-on-errors' could not be configured" in refusal[0]
    journal = json.loads((experiments_dir.parent / "journal-experiment.json").read_text())
    assert journal["gameday"]["outcome"] == "refused" and journal["gameday"]["exit_code"] == 3
    assert journal["run"] == [] and journal["steady_states"]["before"] is None
    _assert_untouched(target, ledger_path)


def test_a_control_whose_configure_fails_refuses_the_run(
    target: HttpTarget,
    prom: PrometheusServer,
    experiments_dir: Path,
    ledger_path: Path,
    gameday: Gameday,
) -> None:
    control = {
        "name": "needs-a-token",
        "provider": {"type": "python", "module": "support.controlkit", "arguments": {"token": ""}},
    }
    path = _write(experiments_dir, _experiment(target, prom.url, [control]))
    result = gameday("run", str(path))
    assert result.returncode == 3, result.stderr
    (refusal,) = [line for line in result.stderr.splitlines() if "refused:" in line]
    assert "control 'needs-a-token' could not be configured: ValueError: token is empty" in refusal
    _assert_untouched(target, ledger_path)
    allowed = gameday("run", "--allow-missing-controls", str(path))
    assert allowed.returncode == 0, allowed.stderr
    assert "running WITHOUT it: control 'needs-a-token'" in allowed.stderr
    assert target.stats()["requests"] >= 10


def test_plain_chaos_run_stops_before_the_hypothesis_when_prometheus_is_down(
    target: HttpTarget,
    experiments_dir: Path,
    ledger_path: Path,
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    plan = str(experiments_dir / "plans" / "steady.yaml")
    path = _write(experiments_dir, _experiment(target, dead, [_abort_control(plan)]))
    journal_path = experiments_dir / "chaos-journal.json"
    done = subprocess.run(
        [str(CHAOS), "--no-version-check", "run", "--journal-path", str(journal_path), str(path)],
        env=cli_env(ledger_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    journal = json.loads(journal_path.read_text())
    assert journal["status"] == "interrupted", done.stderr
    assert journal["steady_states"]["before"] is None and journal["run"] == []
    _assert_untouched(target, ledger_path)
