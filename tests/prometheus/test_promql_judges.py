"""PromQL judged by the Prometheus that will run it; offline, warnings for what it may accept.

A real Prometheus from Debian's package (2.42 here: ``/api/v1/format_query``,
no ``parse_query``); the offline path is promql-parser plus ``promtool`` for
positions. The rule file is this project's, shaped like the template case of
promtool's check (an alert annotation using the undefined ``$label``).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chaos_ext._core.prometheus_api import promtool
from chaos_ext._products.sandbox.servers import prometheus
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer, free_port

Gameday = Callable[..., subprocess.CompletedProcess[str]]
needs_promtool = pytest.mark.skipif(promtool.promtool() is None, reason="promtool not installed")


@pytest.fixture(scope="module")
def server() -> Iterator[PrometheusServer]:
    with prometheus.start() as running:
        yield running


def _with_query(expr: str) -> dict[str, Any]:
    probe = {
        "type": "probe",
        "name": "q",
        "tolerance": True,
        "provider": {
            "type": "python",
            "module": "chaos_ext.prometheus.probes",
            "func": "query_value",
            "arguments": {"expr": expr},
        },
    }
    return {
        "title": "t",
        "description": "d",
        "method": [],
        "steady-state-hypothesis": {"title": "h", "probes": [probe]},
    }


def _validate(
    gameday: Gameday, write: Callable[..., Path], expr: str, url: str | None = None
) -> subprocess.CompletedProcess[str]:
    options = ["--var", f"prometheus_url={url}"] if url else []
    return gameday("validate", *options, str(write(_with_query(expr))))


def test_offline_an_unknown_function_is_a_warning_naming_it(
    gameday: Gameday, write_experiment: Callable[..., Path]
) -> None:
    result = _validate(gameday, write_experiment, "made_up_over_time(x[5m])")
    assert result.returncode == 0, result.stderr
    assert "function 'made_up_over_time' is unknown to the offline parser" in result.stderr
    assert "check against your Prometheus" in result.stderr


@pytest.mark.parametrize(
    ("expr", "what"),
    [
        ("rate(up[1m * 2])", "duration expression needs Prometheus 3.4"),
        ("h >/ 0", "histogram trim operator needs Prometheus 3.11"),
        ("holt_winters(x[5m], 0.5, 0.5)", "holt_winters() was removed in Prometheus 3.0"),
    ],
)
def test_offline_newer_syntax_is_not_rejected(
    expr: str, what: str, gameday: Gameday, write_experiment: Callable[..., Path]
) -> None:
    """More in test_promql_versions.py: each form named with the version that added it."""
    result = _validate(gameday, write_experiment, expr)
    assert result.returncode == 0, result.stderr
    assert what in result.stderr


@needs_promtool
@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("sum by (job) up", 'unexpected identifier "up" in aggregation (at char 14, promtool)'),
        ("up > > 1", "unexpected <op:>> (at char 6, promtool)"),
    ],
)
def test_offline_syntax_errors_name_the_position_and_the_token(
    expr: str, expected: str, gameday: Gameday, write_experiment: Callable[..., Path]
) -> None:
    result = _validate(gameday, write_experiment, expr)
    assert result.returncode == 3
    (line,) = result.stderr.splitlines()
    assert f"expr: invalid PromQL {expr!r}: {expected}" in line


def test_the_server_judges_for_its_version(
    server: PrometheusServer, gameday: Gameday, write_experiment: Callable[..., Path]
) -> None:
    # a 2.x server knows holt_winters: no warning, valid
    known = _validate(gameday, write_experiment, "holt_winters(x[5m], 0.5, 0.5)", server.url)
    assert known.returncode == 0, known.stderr
    assert "unknown to the offline parser" not in known.stderr
    # its own parse error, position and token, naming the server that judged
    bad = _validate(gameday, write_experiment, "sum by (job) up", server.url)
    assert bad.returncode == 3
    judged = re.escape(f" at {server.url})")
    expected = re.escape('unexpected identifier "up" in aggregation (at char 14, judged by ')
    assert re.search(expected + r"Prometheus 2\.\d+\.\d+\S*" + judged, bad.stderr), bad.stderr
    # duration arithmetic: 2.42 has no such syntax, and its verdict is the one for this server
    newer = _validate(gameday, write_experiment, "rate(up[1m * 2])", server.url)
    assert newer.returncode == 3
    assert re.search(r"judged by Prometheus 2\.\S+" + judged, newer.stderr), newer.stderr


def test_a_server_that_does_not_answer_leaves_the_verdict_to_the_offline_check(
    gameday: Gameday, write_experiment: Callable[..., Path]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = _validate(gameday, write_experiment, "holt_winters(x[5m], 0.5, 0.5)", url)
    assert result.returncode == 0, result.stderr
    assert f"Prometheus at {url} did not answer" in result.stderr
    assert "holt_winters() was removed in Prometheus 3.0" in result.stderr


@needs_promtool
def test_a_rule_file_with_an_undefined_template_variable_is_refused(
    gameday: Gameday, write_experiment: Callable[..., Path], tmp_path: Path
) -> None:
    rules = tmp_path / "rules-bad-template.yml"
    rules.write_text(
        "groups:\n  - name: alerts\n    rules:\n      - alert: InstanceDown\n"
        "        expr: up == 0\n        labels: {severity: page}\n        annotations:\n"
        '          summary: "Instance {{ $label.instance }} down"\n'
    )
    path = write_experiment({"title": "t", "description": "d", "method": []})
    result = gameday("validate", "--abort-on", str(rules), str(path))
    assert result.returncode == 3
    assert 'undefined variable "$label"' in result.stderr
    assert "promtool check rules" in result.stderr
    rules.write_text(rules.read_text().replace("$label.", "$labels."))
    assert gameday("validate", "--abort-on", str(rules), str(path)).returncode == 0


def test_an_environment_default_url_is_not_contacted_a_set_variable_is(
    server: PrometheusServer,
    gameday: Gameday,
    write_experiment: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A default is often a sandbox address or a cluster-only name: validation does not go
    looking for it. The variable set, or --var, names the server that will run the query."""
    experiment = _with_query("sum by (job) up")
    experiment["configuration"] = {
        "prometheus_url": {"type": "env", "key": "GD_TEST_PROM_URL", "default": server.url}
    }
    path = write_experiment(experiment)
    monkeypatch.delenv("GD_TEST_PROM_URL", raising=False)
    offline = gameday("validate", str(path))
    assert offline.returncode == 3 and "judged by Prometheus" not in offline.stderr
    monkeypatch.setenv("GD_TEST_PROM_URL", server.url)
    online = gameday("validate", str(path))
    assert online.returncode == 3 and f" at {server.url})" in online.stderr, online.stderr
