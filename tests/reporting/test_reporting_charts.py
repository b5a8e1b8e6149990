"""A run's charts read back from their SVG (tests/support/svgchart.py): the y range from the
data with the tolerance as a band, units on the y axis from the probe catalog, steps
between separate checks, a single value as a marker, each legend entry once, and the
samples from before the run cut."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from support.journals import T0, JournalBuilder
from support.svgchart import NS, axes_span, axis, group, numbers, svgs, texts

from chaos_ext._products.report.charts import Trace, chart_svg, comparison_svg
from chaos_ext._products.report.model import FaultWindow, view_of
from chaos_ext._products.report.render import render_html
from chaos_ext._products.report.series import Series
from chaos_ext._products.report.units import promql_unit, unit_of
from chaos_ext.prometheus.catalogs import default_catalog


def _svg(text: str) -> ET.Element:
    (svg,) = svgs(text)
    return svg


def _y_span(svg: ET.Element) -> tuple[float, float]:
    """The y range the axes show (the axes' background rectangle, through the y ticks)."""
    background = next(g for g in svg.iter(f"{NS}g") if g.get("id") == "patch_2")
    ys = [y for _, y in numbers(next(background.iter(f"{NS}path")).get("d", ""))]
    slope, intercept = axis(svg, "y")
    low, high = sorted((slope * min(ys) + intercept, slope * max(ys) + intercept))
    return low, high


def _vertices(svg: ET.Element, suffix: str) -> list[tuple[float, float]]:
    """The vertices of the first path of a group (a line; its markers' shape follows)."""
    found = group(svg, suffix)
    assert found is not None, suffix
    return numbers(next(found.iter(f"{NS}path")).get("d", ""))


def test_the_y_range_follows_the_data_and_the_tolerance_is_a_band() -> None:
    """The 01-db-latency tolerance [-10, 0.3]: a 0.86 deviation is not squashed at the top."""
    series = Series("median-added", ((T0 + 1, 0.02), (T0 + 5, 0.86), (T0 + 9, 0.05)), False, True)
    tolerance = {"type": "range", "range": [-10.0, 0.3]}
    svg = _svg(chart_svg(series, [], T0, tolerance, salt="t", unit="seconds", until=T0 + 12))
    low, high = _y_span(svg)
    assert -0.2 < low <= 0.02 and 0.86 <= high < 1.1  # the data, padded; not -10
    band = _vertices(svg, "t-tolerance")
    slope, intercept = axis(svg, "y")
    band_ys = sorted(slope * y + intercept for _, y in band)
    assert band_ys[0] == pytest.approx(low, abs=0.01)  # clipped at the axes' bottom
    assert band_ys[-1] == pytest.approx(0.3, abs=0.01)  # what the tolerance accepts
    assert "seconds" in texts(svg) and "within tolerance" in texts(svg)


def test_separate_checks_are_steps_and_the_x_axis_spans_the_run() -> None:
    checks = Series("error-ratio", ((T0 + 2, 0.0), (T0 + 6, 0.5)), False, True, True)
    svg = _svg(chart_svg(checks, [], T0, salt="s", until=T0 + 20))
    step = _vertices(svg, "s-line")
    assert len(step) == 3  # from the first check, along, then up at the second
    first, corner, last = step
    assert corner[0] == pytest.approx(last[0]) and corner[1] == pytest.approx(first[1])
    start, end = axes_span(svg)
    assert start == pytest.approx(0.0, abs=1e-6) and end >= 20.0
    samples = Series("error-ratio", ((T0 + 2, 0.0), (T0 + 6, 0.5)))  # a curve's samples
    assert len(_vertices(_svg(chart_svg(samples, [], T0, salt="r", until=T0 + 20)), "r-line")) == 2


def test_a_single_value_is_a_marker_on_the_runs_time_axis() -> None:
    one = Series("headroom", ((T0 + 7, 12.0),), False, False, True)
    svg = _svg(chart_svg(one, [], T0, salt="o", until=T0 + 30))
    line = group(svg, "o-line")
    assert line is not None and len(list(line.iter(f"{NS}use"))) == 1  # a marker
    assert not [p for p in line.iter(f"{NS}path") if "stroke-width" in (p.get("style") or "")]
    assert axes_span(svg)[1] >= 30.0
    low, high = _y_span(svg)
    assert low < 12.0 < high and high - low < 30  # room around the value, not [0, 1]


def test_each_legend_entry_is_listed_once() -> None:
    series = Series("p95", ((1.0, 0.2), (2.0, 0.3)))
    traces = [Trace(series, (FaultWindow("f", 1.0, 1.5, "ledger"),), 0.0)]
    tolerance = {"type": "range", "range": [0.0, 0.5]}
    svg = _svg(comparison_svg("p95", traces, traces, "seconds", tolerance, salt="c"))
    labels = [t.text for t in svg.iter(f"{NS}text")]
    assert labels.count("tolerance") == 1  # two bounds, one entry
    assert labels.count("fault on (ledger)") == 1


def test_samples_from_before_the_run_are_cut_and_said_so() -> None:
    b = JournalBuilder("cut", {"errors": {"type": "range", "range": [0, 0.01]}})
    b.check("before", "errors", 0.0, 0)
    samples = [[T0 - 40 + i, 0.9] for i in range(30)] + [[T0 + i, 0.0] for i in range(10)]
    b.activity("errors-over-time", 10, 0.1, {"samples": samples}, kind="probe")
    b.check("after", "errors", 0.0, 12)
    html = render_html([view_of(b.build())], "cut")
    assert "30 sample(s) from before this run started are not drawn" in html
    chart = next(s for s in svgs(html) if "errors-over-time" in texts(s))
    assert axes_span(chart)[0] >= -0.5  # the previous experiment's fault is not drawn


def test_every_catalog_probe_has_a_unit_and_the_promql_agrees() -> None:
    probes = default_catalog().probes
    assert probes and all(p.unit for p in probes.values()), [
        n for n, p in probes.items() if not p.unit
    ]
    for name, probe in probes.items():
        inferred = promql_unit(probe.promql)
        assert inferred in ("", probe.unit), (name, inferred, probe.unit)
        assert unit_of(name, None) == probe.unit


@pytest.mark.parametrize(
    ("name", "activity", "unit"),
    [
        (
            "p99",
            {"provider": {"func": "catalog_probe", "arguments": {"name": "http-latency-p99"}}},
            "seconds",
        ),
        (
            "errors",
            {"tolerance": {"type": "range", "target": "error_ratio", "range": [0, 1]}},
            "ratio",
        ),
        (
            "dns",
            {"tolerance": {"type": "range", "target": "p99_ms", "range": [0, 100]}},
            "milliseconds",
        ),
        (
            "p95-over-time",
            {
                "provider": {
                    "arguments": {
                        "expr": "histogram_quantile(0.95, sum by (le) (rate(x_seconds_bucket[5s])))"
                    }
                }
            },
            "seconds",
        ),
        (
            "error-ratio-over-time",
            {
                "provider": {
                    "arguments": {"expr": 'sum(rate(r{code=~"5.."}[5s])) / sum(rate(r[5s]))'}
                }
            },
            "ratio",
        ),
        (
            "dns-errors",
            {"provider": {"arguments": {"expr": "sum(rate(e[10s])) or vector(0)"}}},
            "per second",
        ),
        ("connect-ms", None, "milliseconds"),
        ("app-dns-errors-per-second", None, "per second"),
        ("mystery", None, ""),
    ],
)
def test_units_come_from_the_catalog_the_tolerance_the_promql_and_the_name(
    name: str, activity: dict[str, object] | None, unit: str
) -> None:
    assert unit_of(name, activity) == unit
    assert unit_of(name, activity, boolean=True) == "true/false"
