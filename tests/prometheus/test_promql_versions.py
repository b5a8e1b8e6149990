"""Offline PromQL judged by version: nothing a Prometheus release accepts is refused; what
is newer than the target Prometheus is a warning naming the version that added it.

The table (``chaos_ext/_core/prometheus_api/promql_versions.json``) restates facts from
github.com/prometheus/prometheus (Apache-2.0) at commit d15adb9 (3.14.0): CHANGELOG.md,
docs/querying/functions.md, docs/feature_flags.md, promql/parser/functions.go, lex.go,
parse.go and generated_parser.y, read tag by tag. Its claims for 2.42 are checked with
Debian's ``promtool`` 2.42 (Prometheus' own parser), the target version from the
buildinfo of a real Prometheus 2.42 (Debian's package) behind a proxy that hides its
``format_query`` (as a server older than 2.38 has none).
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests

from chaos_ext._core.prometheus_api import promtool
from chaos_ext._core.prometheus_api.promql import check_promql, validating
from chaos_ext._core.prometheus_api.promql_versions import Target, forms, forms_in
from chaos_ext._products.sandbox.servers import prometheus
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer
from chaos_ext.errors import InvalidArgument

Gameday = Callable[..., subprocess.CompletedProcess[str]]
TABLE = Path(__file__).resolve().parents[2] / "chaos_ext/_core/prometheus_api/promql_versions.json"
needs_promtool = pytest.mark.skipif(promtool.promtool() is None, reason="promtool not installed")
DEBIAN = Target((2, 42, 0), "Prometheus 2.42.0 (promtool)")


@pytest.fixture(scope="module")
def server() -> Iterator[PrometheusServer]:
    with prometheus.start() as running:
        yield running


@pytest.fixture(scope="module")
def old_server(server: PrometheusServer) -> Iterator[str]:
    """The real server, seen as one older than 2.38: buildinfo answers, format_query and
    parse_query are 404. A proxy; every other request goes to the server as it is."""

    class Proxy(BaseHTTPRequestHandler):
        def _forward(self, method: str) -> None:
            if self.path.startswith(("/api/v1/format_query", "/api/v1/parse_query")):
                self.send_error(404)
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {"Content-Type": self.headers.get("Content-Type", "")}
            answer = requests.request(
                method, server.url + self.path, data=body, headers=headers, timeout=10
            )
            self.send_response(answer.status_code)
            self.send_header("Content-Type", answer.headers.get("Content-Type", "text/plain"))
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        def do_GET(self) -> None:
            self._forward("GET")

        def do_POST(self) -> None:
            self._forward("POST")

        def log_message(self, *args: Any) -> None:
            pass

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{proxy.server_address[1]}"
    proxy.shutdown()
    proxy.server_close()


def _with_query(expr: str, configuration: dict[str, Any] | None = None) -> dict[str, Any]:
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
    experiment: dict[str, Any] = {
        "title": "t",
        "description": "d",
        "method": [],
        "steady-state-hypothesis": {"title": "h", "probes": [probe]},
    }
    if configuration:
        experiment["configuration"] = configuration
    return experiment


# the forms of issue #48: each refused, or accepted without a word, before
NEWER = [
    ("up offset (1m * 2)", "duration expression needs Prometheus 3.4 or later"),
    ("rate(up[step()])", "step() in a duration needs Prometheus 3.6 or later"),
    ("rate(up[5m] smoothed)", "smoothed needs Prometheus 3.7 or later"),
    ("increase(up[5m] anchored)", "anchored needs Prometheus 3.7 or later"),
    ("rate(up[1m * 2])", "duration expression needs Prometheus 3.4 or later"),
    ("h >/ 0", "histogram trim operator needs Prometheus 3.11 or later"),
    ('info(up, {k8s_cluster_name=~".+"})', "info() needs Prometheus 2.55 or later"),
    ("limitk(2, up)", "limitk needs Prometheus 2.54 or later"),
    ("limit_ratio(0.5, up)", "limit_ratio needs Prometheus 2.54 or later"),
    ('sort_by_label(up, "job")', "sort_by_label() needs Prometheus 2.49 or later"),
    ("histogram_avg(rate(h[5m]))", "histogram_avg() needs Prometheus 2.51 or later"),
]


@pytest.mark.parametrize(("expr", "note"), NEWER)
def test_offline_newer_forms_are_a_warning_naming_the_version(
    expr: str, note: str, gameday: Gameday, write_experiment: Callable[..., Path]
) -> None:
    result = gameday("validate", str(write_experiment(_with_query(expr))))
    assert result.returncode == 0, result.stderr
    assert note in result.stderr
    assert "the target's version is unknown, judged for the newest (3.14)" in result.stderr


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("rate(up[1m * ])", "'1m *' is not a duration expression (at char 9, offline parser)"),
        ("up offset (1m * )", "'(1m * )' is not a duration expression (at char 11"),
        ("sum by (job) up", 'unexpected identifier "up" in aggregation (at char 14, promtool)'),
        ("sum(up) smoothed", 'unexpected identifier "smoothed" (at char 9, promtool)'),
        ("rate(up[5m] smoothed", "unclosed left parenthesis"),
    ],
)
def test_offline_a_real_syntax_error_is_still_refused(
    expr: str, expected: str, gameday: Gameday, write_experiment: Callable[..., Path]
) -> None:
    if "promtool" in expected and promtool.promtool() is None:
        pytest.skip("promtool not installed")
    result = gameday("validate", str(write_experiment(_with_query(expr))))
    assert result.returncode == 3, result.stderr
    assert f"expr: invalid PromQL {expr!r}: {expected}" in result.stderr


@needs_promtool
@pytest.mark.parametrize("name", sorted(forms()))
def test_the_table_agrees_with_promtool_2_42(name: str, caplog: pytest.LogCaptureFixture) -> None:
    """Each form's example: promtool 2.42 accepts it exactly when the table says 2.42 has it
    (without a flag); offline, for a 2.42 target, it is never refused and warned about
    exactly when 2.42 refuses it."""
    (example,) = [row["example"] for row in _rows() if row["form"] == name]
    assert name in [form.name for form in forms_in(example)]
    accepted_by_2_42 = promtool.syntax_error(example) is None
    caplog.set_level(logging.WARNING)
    with validating(target=DEBIAN):
        assert check_promql(example) == example
    warned = [r.getMessage() for r in caplog.records if "needs Prometheus" in r.getMessage()]
    assert bool(warned) is not accepted_by_2_42, (example, warned)
    if warned:
        (line,) = warned
        assert "the target is Prometheus 2.42.0 (promtool)" in line


def test_a_form_newer_than_the_target_names_the_version_and_the_flag(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    with validating(target=Target((3, 4), "Prometheus 3.4 (prometheus_version)")):
        check_promql("rate(up[5m] smoothed) + rate(up[1m * 2])")
        check_promql("first_over_time(up[5m])")
    smoothed, first = (r.getMessage() for r in caplog.records)
    assert "smoothed needs Prometheus 3.7 or later with " in smoothed
    assert "--enable-feature=promql-extended-range-selectors" in smoothed
    assert "duration expression needs --enable-feature=promql-duration-expr" in smoothed
    assert "the target is Prometheus 3.4 (prometheus_version)" in smoothed
    assert "first_over_time() needs Prometheus 3.7 or later" in first
    caplog.clear()
    with validating(target=Target((3, 14), "Prometheus 3.14")):
        check_promql("rate(up[1m * 2]) + first_over_time(up[5m]) + clamp(up, 0, 1)")
    assert not caplog.records  # 3.14: duration expressions and first_over_time by default


def test_strings_comments_and_at_start_are_not_forms() -> None:
    assert forms_in('up{job="info(x) [1m*2] @"} # limitk(1, up) smoothed') == []
    assert [form.name for form in forms_in("max(up[5m] @ start())")] == ["@"]
    assert [form.name for form in forms_in("start()")] == ["start"]


def test_a_removed_function_is_not_refused_and_says_what_replaced_it(
    gameday: Gameday, write_experiment: Callable[..., Path]
) -> None:
    path = write_experiment(_with_query("holt_winters(x[5m], 0.5, 0.5)"))
    assert (
        "was removed in"
        not in gameday("validate", "--var", "prometheus_version=2.42", str(path)).stderr
    )
    newer = gameday("validate", "--var", "prometheus_version=3.0", str(path))
    assert newer.returncode == 0, newer.stderr
    assert "holt_winters() was removed in Prometheus 3.0: use double_exponential_smoothing()" in (
        newer.stderr
    )


def test_prometheus_version_sets_the_target(
    gameday: Gameday, write_experiment: Callable[..., Path]
) -> None:
    path = write_experiment(_with_query("limitk(2, up)"))
    old = gameday("validate", "--var", "prometheus_version=2.42", str(path))
    assert old.returncode == 0, old.stderr
    assert "limitk needs Prometheus 2.54 or later with --enable-feature=promql-experimental" in (
        old.stderr
    )
    assert "the target is Prometheus 2.42 (prometheus_version)" in old.stderr
    declared = write_experiment(
        _with_query("limitk(2, up)", {"prometheus_version": "3.5.0"}), "declared.json"
    )
    new = gameday("validate", str(declared))
    assert "limitk needs --enable-feature=promql-experimental-functions" in new.stderr
    bad = gameday("validate", "--var", "prometheus_version=latest", str(path))
    assert bad.returncode == 3
    assert "prometheus_version='latest' is not a Prometheus version" in bad.stderr


def test_the_target_version_comes_from_the_servers_buildinfo(
    old_server: str, gameday: Gameday, write_experiment: Callable[..., Path]
) -> None:
    version = requests.get(f"{old_server}/api/v1/status/buildinfo", timeout=10).json()
    built = version["data"]["version"]
    assert built.startswith("2.42.")
    for expr, note in [
        ("info(up)", "info() needs Prometheus 2.55 or later"),
        ("rate(up[5m] smoothed)", "smoothed needs Prometheus 3.7 or later"),
    ]:
        path = write_experiment(_with_query(expr))
        result = gameday("validate", "--var", f"prometheus_url={old_server}", str(path))
        assert result.returncode == 0, result.stderr
        assert "has neither /api/v1/format_query nor /api/v1/parse_query" in result.stderr
        assert note in result.stderr
        said = f"the target is Prometheus {built} at {old_server} (its buildinfo)"
        assert said in result.stderr, result.stderr
    # a form 2.42 has: no word
    path = write_experiment(_with_query("clamp(up, 0, 1)"))
    quiet = gameday("validate", "--var", f"prometheus_url={old_server}", str(path))
    assert quiet.returncode == 0 and "needs Prometheus" not in quiet.stderr, quiet.stderr


def test_online_the_server_still_judges(
    server: PrometheusServer, gameday: Gameday, write_experiment: Callable[..., Path]
) -> None:
    """With a server that judges, its verdict stands: 2.42 refuses smoothed and info()."""
    for expr in ("rate(up[5m] smoothed)", "info(up)"):
        path = write_experiment(_with_query(expr))
        result = gameday("validate", "--var", f"prometheus_url={server.url}", str(path))
        assert result.returncode == 3, result.stderr
        assert re.search(
            rf"judged by Prometheus 2\.42\.\S+ at {re.escape(server.url)}\)", (result.stderr)
        ), result.stderr


def _rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(TABLE.read_text())["forms"]
    return rows


def test_the_table_names_its_source_commit_and_licence() -> None:
    table = json.loads(TABLE.read_text())
    assert "github.com/prometheus/prometheus" in table["source"]
    assert re.fullmatch(r"[0-9a-f]{40}", table["commit"])
    assert table["licence"].startswith("Apache-2.0")
    assert all(row["source"] and row["example"] for row in table["forms"])


CORPUS = Path(__file__).parent / "fixtures" / "promql_corpus"  # SOURCES.md there


def _corpus(name: str) -> list[str]:
    return (CORPUS / name).read_text().splitlines()


def test_offline_nothing_of_prometheus_own_tests_is_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """1,828 expressions of Prometheus' engine tests (main after 3.14, every feature on)
    and 518 of 2.42's: the offline check refuses none. For a 2.42 target, not one of
    2.42's own is warned about."""
    newest = _corpus("prometheus-main-d15adb9.txt")
    debian = _corpus("prometheus-2.42.0.txt")
    assert (len(newest), len(debian)) == (1828, 518)
    refused = []
    with validating(target=DEBIAN):
        for expr in [*newest, *debian]:
            try:
                check_promql(expr)
            except InvalidArgument as exc:
                refused.append(str(exc))
        assert refused == []
        caplog.clear()
        caplog.set_level(logging.WARNING)
        for expr in debian:
            check_promql(expr)
    assert [r.getMessage() for r in caplog.records] == []


def test_min_and_max_in_a_duration_are_named_as_renamed_in_3_13(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """3.6 to 3.12 took ``min()``/``max()`` in durations; 3.13 renamed them min_of/max_of."""
    caplog.set_level(logging.WARNING)
    for version in ((3, 8), (3, 13)):
        with validating(target=Target(version, f"Prometheus {version}")):
            check_promql("rate(up[min(1m, step())])")
    in_3_8, in_3_13 = (r.getMessage() for r in caplog.records)
    assert "min()/max() in a duration needs --enable-feature=promql-duration-expr" in in_3_8
    assert "min()/max() in a duration was removed in Prometheus 3.13: use min_of()/max_of()" in (
        in_3_13
    )
