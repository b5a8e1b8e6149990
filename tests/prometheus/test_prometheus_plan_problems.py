"""Before the run: alerts that can never fire are named, and an abort plan lists all its
problems (issue 26 item 5), against a real Prometheus.

The Prometheus here has the test exporter's metrics and no recording rules, like a
cluster whose Prometheus lacks kube-prometheus' ``apiserver_request:burnrate*``:
the kubernetes-mixin's ``KubeAPIErrorBudgetBurn`` (unchanged, from
tests/prometheus/fixtures/rules/kubernetes-mixin-alerts.yaml) can never fire there.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import yaml
from support.exporter import Exporter
from support.promquery import wait_value

from chaos_ext._core.prometheus_api.promql import missing_metrics
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer

K8S = Path(__file__).parent / "fixtures" / "rules" / "kubernetes-mixin-alerts.yaml"


def _experiment(tmp: Path, prom_url: str) -> Path:
    path = tmp / "experiment.json"
    path.write_text(
        json.dumps(
            {
                "title": "plan checks",
                "description": "issue 26 item 5",
                "configuration": {"prometheus_url": prom_url},
                "method": [
                    {
                        "type": "action",
                        "name": "noop",
                        "provider": {"type": "process", "path": "true"},
                    }
                ],
            }
        )
    )
    return path


def test_alerts_that_can_never_fire_are_named_one_line_each(
    gameday: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
    exporter: Exporter,
    prom: PrometheusServer,
    metric: Callable[[str], str],
) -> None:
    name = metric("firable")
    exporter.gauge(name).set(0)
    wait_value(prom, name, 0)
    own = tmp_path / "own.yaml"
    own.write_text(
        yaml.safe_dump(
            {
                "groups": [
                    {
                        "name": "own",
                        "rules": [
                            {
                                "alert": "GamedayCanFire",
                                "expr": f"{name} > 0",
                                "labels": {"severity": "critical"},
                            },
                            {
                                "alert": "GamedayNoExporter",
                                "expr": "absent(gameday_no_such_metric)",
                                "for": "10m",
                                "labels": {"severity": "critical"},
                            },
                            {
                                "alert": "GamedayTypo",
                                "expr": f"{name}_typo > 0 or gameday_other_typo > 1",
                                "labels": {"severity": "critical"},
                            },
                        ],
                    }
                ]
            }
        )
    )
    result = gameday(
        "run",
        "--journal",
        str(tmp_path / "journal.json"),
        "--abort-on",
        str(K8S),
        "--abort-on",
        str(own),
        "--alerts",
        "alertname=KubeAPIErrorBudgetBurn",
        "--alerts",
        "alertname=~Gameday.*",
        str(_experiment(tmp_path, prom.url)),
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "can never fire" in line]
    assert len(lines) == 2, result.stderr
    assert (
        "alert KubeAPIErrorBudgetBurn can never fire here: it needs recording rule(s) "
        "apiserver_request:burnrate1d, apiserver_request:burnrate1h" in lines[0]
    )
    assert lines[1].endswith(
        f"alert GamedayTypo can never fire here: it needs series gameday_other_typo, "
        f"{name}_typo, which this Prometheus does not have"
    ), lines[1]
    journal = json.loads((tmp_path / "journal.json").read_text())
    assert len(journal["gameday"]["abort"]["cannot_fire"]) == 2


def test_an_abort_plan_lists_every_problem(
    gameday: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
    prom: PrometheusServer,
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        yaml.safe_dump(
            {
                "interval_seconds": 0,
                "conditions": [
                    {"probe": "http-eror-ratio"},
                    {
                        "name": "typo",
                        "promql": "sum(rate(x[1m])",
                        "tolerance": {"op": "<", "threshold": 1},
                    },
                ],
            }
        )
    )
    experiment = _experiment(tmp_path, prom.url)
    for command in ("validate", "run"):
        result = gameday(command, "--abort-on", str(plan), str(experiment))
        assert result.returncode == 3, result.stderr
        text = " ".join(result.stderr.split())
        assert "3 problems" in text, text
        assert "did you mean http-error-ratio" in text
        assert "invalid PromQL 'sum(rate(x[1m])'" in text
        assert "interval_seconds: 0 must be a number of seconds above zero" in text


def test_what_an_expression_needs_follows_promql_set_operators() -> None:
    present = {"up", "errors_total"}
    assert missing_metrics("rate(errors_total[5m]) > 0", present) == set()
    assert missing_metrics("absent(nothing_here)", present) == set()
    assert missing_metrics("nothing_here or up", present) == set()  # either side will do
    assert missing_metrics("up unless nothing_here", present) == set()
    assert missing_metrics("up and on() a:b", present) == {"a:b"}
    assert missing_metrics("sum by (x) (a) / max_over_time(b[5m:1m])", present) == {"a", "b"}
    assert missing_metrics('{__name__="gone"} > 1', present) == {"gone"}
