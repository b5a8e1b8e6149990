"""Authentication and TLS: what the client factory sends, against real servers."""

from __future__ import annotations

import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.recording_proxy import start_recording_proxy
from urllib3.exceptions import InsecureRequestWarning

from chaos_ext._core.prometheus_api.client import settings_from
from chaos_ext._products.sandbox.servers import prometheus
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer
from chaos_ext.errors import InvalidArgument, PrometheusHTTPError, PrometheusUnreachable
from chaos_ext.prometheus import probes


def test_bearer_token_is_sent_and_never_shown(prom: PrometheusServer) -> None:
    proxy = start_recording_proxy(prom.url)
    try:
        config = {"prometheus_url": proxy.url}
        secrets = {"prometheus": {"prometheus_token": "s3cr3t-token"}}
        assert probes.query_value("vector(1)", configuration=config, secrets=secrets) == 1.0
        assert proxy.headers[-1]["Authorization"] == "Bearer s3cr3t-token"
        assert "s3cr3t-token" not in repr(settings_from(config, secrets))
        # without a secret no Authorization header at all
        probes.query_value("vector(2)", configuration=config)
        assert "Authorization" not in proxy.headers[-1]
    finally:
        proxy.stop()


@pytest.fixture(scope="module")
def prom_basic_auth() -> Iterator[PrometheusServer]:
    with prometheus.start(basic_auth=("gameday", "hunter2-long")) as server:
        yield server


def test_basic_auth_against_prometheus_web_config(prom_basic_auth: PrometheusServer) -> None:
    config = {"prometheus_url": prom_basic_auth.url}
    good = {"prometheus_username": "gameday", "prometheus_password": "hunter2-long"}
    assert probes.query_value("vector(3)", configuration=config, secrets=good) == 3.0
    with pytest.raises(PrometheusHTTPError, match=r"HTTP 401.*basic auth") as caught:
        probes.query_value("vector(3)", configuration=config)
    assert "hunter2" not in str(caught.value)
    bad = {"prometheus_username": "gameday", "prometheus_password": "wrong"}
    with pytest.raises(PrometheusHTTPError, match="HTTP 401"):
        probes.query_value("vector(3)", configuration=config, secrets=bad)
    with pytest.raises(InvalidArgument, match="both"):
        probes.query_value("vector(3)", configuration=config, secrets={"prometheus_username": "x"})


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def test_tls_verification_ca_file_and_opt_out(tls_files: tuple[Path, Path]) -> None:
    cert, key = tls_files
    with prometheus.start(tls=(cert, key)) as server:
        assert server.url.startswith("https://")
        base: dict[str, Any] = {"prometheus_url": server.url, "prometheus_timeout_seconds": 5}
        with pytest.raises(PrometheusUnreachable, match="SSLError"):
            probes.query_value("vector(4)", configuration=base)
        with_ca = {**base, "prometheus_ca_file": str(cert)}
        assert probes.query_value("vector(4)", configuration=with_ca) == 4.0
        no_verify = {**base, "prometheus_verify_tls": "false"}
        filters = list(warnings.filters)
        # the opt-out is not hidden: urllib3 warns, and no process-wide filter is installed
        with pytest.warns(InsecureRequestWarning):
            assert probes.query_value("vector(5)", configuration=no_verify) == 5.0
        assert warnings.filters == filters
