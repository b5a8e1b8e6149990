"""The probe catalog: every entry is PromQL the real Prometheus accepts; parameters are safe."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.exporter import Exporter
from support.promquery import wait_result, wait_value

from chaos_ext._core.prometheus_api.client import client
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer
from chaos_ext.controls._plan import load_plan
from chaos_ext.errors import EmptyResult, InvalidArgument
from chaos_ext.prometheus import probes
from chaos_ext.prometheus._probe_files import (
    BUILTIN_DIR,
    CATALOG_ENV,
    builtin_abort_plans,
    catalog_files,
    default_catalog,
    load_catalog,
)

ROOT = Path(__file__).resolve().parents[2]

REQUIRED = {
    "http-error-ratio",
    "http-latency-p95",
    "http-latency-p99",
    "dnsmasq-child-processes",
    "coredns-forward-cache-miss-rate",
    "coredns-io-timeout-rate",
    "node-local-dns-latency-p99",
    "postgres-connection-headroom",
    "mysql-connection-headroom",
    "hpa-replicas-missing",
    "nodes-not-ready",
    "envoy-overload-actions-active",
    "envoy-downstream-connections",
}


def test_catalog_has_the_probes_the_platform_needs() -> None:
    catalog = default_catalog()
    assert set(catalog.names()) >= REQUIRED
    for name in catalog.names():
        probe = catalog.get(name)
        assert len(probe.description) > 20 and len(probe.watches) > 20, name
        assert probe.source.startswith(str(BUILTIN_DIR))


def test_every_catalog_entry_parses_on_the_real_prometheus(config: dict[str, Any]) -> None:
    catalog = default_catalog()
    prom = client(config)
    for name in catalog.names():
        probe = catalog.get(name)
        expr = probe.render()
        prom.instant(expr)  # raises PromQLError quoting Prometheus when it does not parse
        for param, spec in probe.parameters.items():  # substituted values parse too
            if spec.kind == "label":
                prom.instant(probe.render({param: "some-other-value"}))


def test_parameters_point_entries_at_another_service(
    exporter: Exporter,
    prom: PrometheusServer,
    config: dict[str, Any],
    metric: Callable[[str], str],
) -> None:
    name = metric("requests_total")
    requests = exporter.counter(name, labels=["code"])
    requests.labels(code="200").inc(0)
    requests.labels(code="503").inc(0)
    wait_value(prom, f'sum({name}_total{{job="gameday"}})', 0)
    requests.labels(code="200").inc(97)
    requests.labels(code="503").inc(3)
    wait_value(prom, f'sum({name}_total{{job="gameday"}})', 100)
    params = {"job": "gameday", "metric": f"{name}_total", "window": "30s"}
    ratio = probes.catalog_probe("http-error-ratio", params, configuration=config)
    assert ratio == pytest.approx(0.03, rel=1e-9)  # rate() scales both sides alike
    assert probes.catalog_check("http-error-ratio", params, configuration=config) is False
    assert probes.catalog_check("targets-up", {"job": "gameday"}, configuration=config) is True
    # series but no traffic: 0/0 stands for "no errors", as the catalog says (if_nan: 0)
    idle_name = metric("idle_total")
    idle = exporter.counter(idle_name, labels=["code"])
    idle.labels(code="503").inc(0)
    idle_params = {"job": "gameday", "metric": f"{idle_name}_total", "window": "30s"}
    expr = default_catalog().get("http-error-ratio").render(idle_params)
    assert wait_result(prom, expr)[0]["value"][1] == "NaN"
    assert probes.catalog_probe("http-error-ratio", idle_params, configuration=config) == 0.0
    # no series at all (a wrong job) is not "no errors": it is an error
    with pytest.raises(EmptyResult, match="returned no series"):
        probes.catalog_probe("http-error-ratio", {"job": "nobody"}, configuration=config)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"job": 'x"} or vector(1) or up{a="'}, "double quote"),
        ({"window": "5 minutes"}, "not a duration"),
        ({"metric": "rate(x)"}, "not a metric or label name"),
        ({"jobb": "api"}, "unknown parameter"),
    ],
)
def test_parameters_are_checked_before_reaching_promql(
    params: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        default_catalog().get("http-error-ratio").render(params)


def test_unknown_name_suggests_close_ones() -> None:
    with pytest.raises(InvalidArgument, match="did you mean http-error-ratio"):
        default_catalog().get("http-eror-ratio")


def test_team_catalog_layer_overrides_and_adds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "team.yaml").write_text(
        "probes:\n"
        "  http-error-ratio:\n"
        "    description: stricter error budget for checkout\n"
        "    watches: payment failures\n"
        "    promql: sum(rate(checkout_errors_total[1m]))\n"
        "    tolerance: {range: [0, 0.001]}\n"
        "  checkout-queue:\n"
        '    promql: max(queue_depth{queue="${queue}"})\n'
        "    parameters: {queue: {default: orders}}\n"
        "    tolerance: {op: '<', threshold: 100}\n"
    )
    monkeypatch.setenv(CATALOG_ENV, str(tmp_path))
    catalog = default_catalog()
    assert catalog.get("http-error-ratio").tolerance.describe() == "in [0, 0.001]"
    assert catalog.get("checkout-queue").render() == 'max(queue_depth{queue="orders"})'
    assert "nodes-not-ready" in catalog


def test_a_name_twice_in_one_layer_is_refused(tmp_path: Path) -> None:
    entry = "  dup:\n    promql: up\n    tolerance: {op: '==', threshold: 1}\n"
    (tmp_path / "a.yaml").write_text("probes:\n" + entry)
    (tmp_path / "b.yaml").write_text("probes:\n" + entry)
    with pytest.raises(InvalidArgument, match="defined twice"):
        load_catalog(catalog_files(str(tmp_path)))


def test_placeholders_without_parameters_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        "probes:\n  bad:\n    promql: up{job=\"${job}\"}\n    tolerance: {op: '==', threshold: 1}\n"
    )
    with pytest.raises(InvalidArgument, match="placeholders"):
        load_catalog([[tmp_path / "a.yaml"]])


def test_shipped_experiment_and_abort_plan_are_valid(
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    result = gameday("validate", str(ROOT / "experiments" / "prometheus-edge-slo.json"))
    assert result.returncode == 0, result.stdout + result.stderr
    plans = builtin_abort_plans()
    assert "edge" in plans
    for plan in plans.values():
        assert load_plan(plan).conditions


def test_validate_refuses_an_unknown_catalog_probe(
    gameday: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
) -> None:
    experiment = json.loads((ROOT / "experiments" / "prometheus-edge-slo.json").read_text())
    probe = experiment["steady-state-hypothesis"]["probes"][0]
    probe["provider"]["arguments"]["name"] = "http-eror-ratio"
    path = tmp_path / "typo.json"
    path.write_text(json.dumps(experiment))
    result = gameday("validate", str(path))
    assert result.returncode == 3
    assert "did you mean http-error-ratio" in " ".join((result.stdout + result.stderr).split())
