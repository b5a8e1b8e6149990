"""The probes inside a real `gameday run`: Chaos Toolkit tolerances used as they are."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.exporter import Exporter
from support.promquery import wait_value

from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer


def _probe(name: str, func: str, tolerance: Any, **arguments: Any) -> dict[str, Any]:
    return {
        "type": "probe",
        "name": name,
        "tolerance": tolerance,
        "provider": {
            "type": "python",
            "module": "chaos_ext.prometheus.probes",
            "func": func,
            "arguments": arguments,
        },
    }


def test_range_and_boolean_tolerances_decide_the_hypothesis(
    gameday: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
    exporter: Exporter,
    prom: PrometheusServer,
    metric: Callable[[str], str],
) -> None:
    name = metric("error_ratio")
    gauge = exporter.gauge(name)
    gauge.set(0.002)
    wait_value(prom, name, 0.002)
    time.sleep(3)  # a 2 s window must be full of samples, not start before the first one
    experiment = {
        "title": "error ratio within its line",
        "description": "range tolerance on a float, true on a verdict",
        "configuration": {"prometheus_url": prom.url},
        "steady-state-hypothesis": {
            "title": "errors low",
            "probes": [
                _probe("ratio", "query_value", {"type": "range", "range": [0, 0.01]}, expr=name),
                _probe(
                    "slo",
                    "slo_holds",
                    True,
                    expr=name,
                    op="<",
                    threshold=0.01,
                    window_seconds=2,
                    step_seconds=1,
                    min_fraction=0.5,
                ),
            ],
        },
        "method": [],
    }
    path = tmp_path / "hypothesis.json"
    path.write_text(json.dumps(experiment))
    held = gameday("run", "--journal", str(tmp_path / "held.json"), str(path))
    assert held.returncode == 0, held.stdout + held.stderr
    journal = json.loads((tmp_path / "held.json").read_text())
    outputs = [p["output"] for p in journal["steady_states"]["before"]["probes"]]
    assert outputs == [0.002, True]

    gauge.set(0.5)
    wait_value(prom, name, 0.5)
    deviated = gameday("run", "--journal", str(tmp_path / "deviated.json"), str(path))
    assert deviated.returncode == 1, deviated.stdout + deviated.stderr
    journal = json.loads((tmp_path / "deviated.json").read_text())
    first = journal["steady_states"]["before"]["probes"][0]
    assert first["output"] == 0.5 and first["tolerance_met"] is False
