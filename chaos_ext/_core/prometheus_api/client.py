"""The one place that builds Prometheus clients and converts their errors.

Connection settings come from the Chaos Toolkit ``configuration`` and
``secrets`` of the activity (``secrets`` may also hold a ``prometheus`` scope):

================================  =========================================================
configuration key                 meaning
================================  =========================================================
``prometheus_url``                base URL, e.g. ``http://prometheus.monitoring:9090``
                                  (``prometheus_base_url``, chaostoolkit-prometheus' key,
                                  is accepted too)
``prometheus_timeout_seconds``    seconds per request, also sent as the query ``timeout``
                                  (default 10)
``prometheus_verify_tls``         ``false`` to skip certificate checks (default true)
``prometheus_ca_file``            CA bundle used to verify the server certificate
``prometheus_retries``            retries on connection errors and 502/503/504 (default 1)
================================  =========================================================

Secrets: ``prometheus_token`` (sent as ``Authorization: Bearer ...``), or
``prometheus_username`` + ``prometheus_password`` (basic auth). They never
appear in ``repr``, logs or error messages.

Requests go through prometheus-api-client's ``PrometheusConnect`` on a
``requests`` session that is cached per settings (connection reuse keeps a
steady-state check of ten probes cheap). Every failure is raised as one of
:class:`~chaos_ext.errors.PrometheusUnreachable`,
:class:`~chaos_ext.errors.PrometheusHTTPError`,
:class:`~chaos_ext.errors.PromQLError` (Prometheus's own message quoted).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

import requests
from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry

from chaos_ext._core.prometheus_api.results import shown
from chaos_ext.errors import (
    InvalidArgument,
    PrometheusHTTPError,
    PrometheusUnreachable,
    PromQLError,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "PrometheusClient",
    "PrometheusSettings",
    "client",
    "go_time",
    "settings_from",
]

logger = logging.getLogger("chaostoolkit")

DEFAULT_TIMEOUT = 10.0
"""Seconds per request when ``prometheus_timeout_seconds`` is not configured."""

_PROMQL_STATUSES = (400, 422)  # bad_data (parse) and execution errors


@dataclass(frozen=True)
class PrometheusSettings:
    """Where Prometheus is and how to talk to it (secrets are never shown)."""

    url: str
    timeout: float = DEFAULT_TIMEOUT
    verify: bool | str = True
    retries: int = 1
    token: str = field(default="", repr=False)
    username: str = ""
    password: str = field(default="", repr=False)


def _secret(secrets: Mapping[str, Any], key: str) -> str:
    scoped = secrets.get("prometheus")
    if isinstance(scoped, Mapping) and scoped.get(key):
        return str(scoped[key])
    return str(secrets.get(key) or "")


def _as_bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise InvalidArgument(f"configuration {key}={value!r} is not a boolean; use true or false")


def _as_number(value: Any, key: str, default: float) -> float:
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if number < 0:
        raise InvalidArgument(f"configuration {key}={value!r} must be a number >= 0")
    return number


def settings_from(
    configuration: Mapping[str, Any] | None, secrets: Mapping[str, Any] | None
) -> PrometheusSettings:
    """Read :class:`PrometheusSettings` from Chaos Toolkit configuration/secrets."""
    config = configuration or {}
    secret = secrets or {}
    url = str(config.get("prometheus_url") or config.get("prometheus_base_url") or "").strip()
    if not url.startswith(("http://", "https://")):
        raise InvalidArgument(
            f"configuration prometheus_url={url!r} is not an http(s) URL; "
            "set it, e.g. --var prometheus_url=http://127.0.0.1:9090"
        )
    verify: bool | str = _as_bool(
        config.get("prometheus_verify_tls", True), "prometheus_verify_tls"
    )
    if verify and config.get("prometheus_ca_file"):
        verify = str(config["prometheus_ca_file"])
    username = _secret(secret, "prometheus_username")
    password = _secret(secret, "prometheus_password")
    if bool(username) != bool(password):
        raise InvalidArgument("secrets need both prometheus_username and prometheus_password")
    return PrometheusSettings(
        url=url.rstrip("/"),
        timeout=_as_number(
            config.get("prometheus_timeout_seconds"), "prometheus_timeout_seconds", DEFAULT_TIMEOUT
        ),
        verify=verify,
        retries=int(_as_number(config.get("prometheus_retries"), "prometheus_retries", 1)),
        token=_secret(secret, "prometheus_token"),
        username=username,
        password=password,
    )


def go_time(text: str) -> float:
    """Unix time of a Go RFC 3339 timestamp (nanoseconds cut to what Python parses)."""
    found = re.match(r"^(.*T\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", text.strip())
    if found is None:
        raise ValueError(f"not a timestamp: {text!r}")
    head, fraction, zone = found.groups()
    stamp = f"{head}{(fraction or '')[:7]}{'+00:00' if zone == 'Z' else zone}"
    return datetime.fromisoformat(stamp).timestamp()


class _Rejected(Exception):
    """A non-2xx answer, raised from the session's response hook."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message


def _reject_errors(response: requests.Response, *args: Any, **kwargs: Any) -> None:
    if response.status_code < 400:
        return
    error_type, message = "", " ".join(response.text.split())[:300]
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("error"):
        error_type = str(body.get("errorType") or "")
        message = " ".join(str(body["error"]).split())
    raise _Rejected(response.status_code, error_type, message)


def _environment(session: requests.Session, url: str) -> tuple[str, str] | None:
    """Read once what requests would read from the environment on every request (proxies
    and NO_PROXY, REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE, ~/.netrc): the same settings,
    without scanning the whole environment per query. The ~/.netrc login for ``url``, if
    any, is returned (used when no other credentials are configured)."""
    session.trust_env = False
    session.proxies.update(requests.utils.get_environ_proxies(url))
    if session.verify is True:
        bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
        session.verify = bundle or True
    netrc = requests.utils.get_netrc_auth(url)
    return (netrc[0], netrc[1]) if netrc else None


class PrometheusClient:
    """Instant and range queries returning Prometheus's ``data`` object, typed errors."""

    def __init__(self, settings: PrometheusSettings) -> None:
        self.settings = settings
        session = requests.Session()
        session.verify = settings.verify
        if settings.verify is False:
            # The operator opted out. urllib3 also warns (InsecureRequestWarning): that warning
            # is left alone, since a filter installed here would change the whole process;
            # Python's default filter shows it once per place in the code anyway.
            host = urlparse(settings.url).hostname or ""
            logger.warning("prometheus: TLS certificate of %s is NOT verified", host)
        session.hooks["response"].append(_reject_errors)
        headers = {"Accept": "application/json"}
        if settings.token:
            headers["Authorization"] = f"Bearer {settings.token}"
        netrc = _environment(session, settings.url)
        auth = (settings.username, settings.password) if settings.username else netrc
        retry = Retry(
            total=settings.retries,
            connect=settings.retries,
            read=0,
            status=settings.retries,
            backoff_factor=0.1,
            status_forcelist=(502, 503, 504),
            raise_on_status=False,
        )
        self._connect = PrometheusConnect(
            url=settings.url,
            headers=headers,
            auth=auth,
            session=session,
            retry=retry,
            timeout=settings.timeout,
        )

    @property
    def _timeout_param(self) -> str:
        return f"{max(1, round(self.settings.timeout * 1000))}ms"

    def instant(self, expr: str, *, at: float | None = None) -> Any:
        """``result`` of ``/api/v1/query`` (vector, scalar or matrix as Prometheus sent it)."""
        params: dict[str, Any] = {"timeout": self._timeout_param}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self._call(expr, self._connect.custom_query, query=expr, params=params)

    def range(self, expr: str, *, start: float, end: float, step: float) -> Any:
        """``result`` of ``/api/v1/query_range`` between two Unix times."""
        return self._call(
            expr,
            self._connect.custom_query_range,
            query=expr,
            start_time=datetime.fromtimestamp(start, UTC),
            end_time=datetime.fromtimestamp(end, UTC),
            step=f"{step:g}",
            # the client rounds start/end to whole seconds: send them exactly
            params={"timeout": self._timeout_param, "start": f"{start:.3f}", "end": f"{end:.3f}"},
        )

    def alerts(self) -> list[dict[str, Any]]:
        """``alerts`` of ``/api/v1/alerts``: pending and firing alerts of Prometheus's rules."""
        data = self._call("/api/v1/alerts", self._get_data, path="/api/v1/alerts")
        alerts = data.get("alerts") if isinstance(data, dict) else None
        if not isinstance(alerts, list):
            raise ValueError("no 'alerts' list in the answer")
        return alerts

    def alerting_rules(self) -> list[dict[str, Any]]:
        """The alerting rules Prometheus evaluates (``/api/v1/rules?type=alert``), each with
        its group's ``interval`` (seconds) added: their ``duration`` (``for``) and alerts."""
        return self._rules("alert")

    def recorded_names(self) -> set[str]:
        """The names of the recording rules Prometheus evaluates."""
        return {str(rule.get("name")) for rule in self._rules("record")}

    def metric_names(self) -> set[str]:
        """Every metric name Prometheus has series of (``/api/v1/label/__name__/values``)."""
        path = "/api/v1/label/__name__/values"
        data = self._call(path, self._get_data, path=path)
        if not isinstance(data, list):
            raise ValueError("no list of names in the answer")
        return {str(name) for name in data}

    def _rules(self, kind: str) -> list[dict[str, Any]]:
        path = f"/api/v1/rules?type={kind}"
        data = self._call("/api/v1/rules", self._get_data, path=path)
        groups = data.get("groups") if isinstance(data, dict) else None
        if not isinstance(groups, list):
            raise ValueError("no 'groups' list in the answer")
        wanted = "alerting" if kind == "alert" else "recording"
        return [
            {**rule, "interval": float(group.get("interval") or 0)}
            for group in groups
            for rule in group.get("rules") or []
            if rule.get("type") == wanted
        ]

    def start_time(self) -> float | None:
        """When the Prometheus process started (``/api/v1/status/runtimeinfo``), None when
        the server does not say (Thanos, Mimir and other query frontends)."""
        try:
            data = self._call("runtimeinfo", self._get_data, path="/api/v1/status/runtimeinfo")
            return go_time(str(data["startTime"]))
        except (PrometheusHTTPError, PromQLError, KeyError, TypeError, ValueError):
            return None

    def _get_data(self, path: str) -> Any:
        connect = self._connect
        response = connect._session.get(
            f"{self.settings.url}{path}",
            headers=connect.headers,
            auth=connect.auth,
            timeout=self.settings.timeout,
        )
        body = response.json()
        if body.get("status") != "success":
            raise ValueError(f"status {body.get('status')!r}: {body.get('error')}")
        return body.get("data")

    def _call(self, expr: str, func: Any, **kwargs: Any) -> Any:
        where = self.settings.url
        try:
            return func(**kwargs)
        except _Rejected as exc:
            if exc.status in _PROMQL_STATUSES:
                raise PromQLError(f"Prometheus rejected {shown(expr)}: {exc.message}") from None
            auth = exc.status in (401, 403)
            hint = " (check prometheus_token / basic auth secrets)" if auth else ""
            raise PrometheusHTTPError(
                f"Prometheus at {where} answered HTTP {exc.status} to {shown(expr)}: "
                f"{exc.message}{hint}"
            ) from None
        except requests.RequestException as exc:
            reason = type(exc).__name__
            raise PrometheusUnreachable(
                f"Prometheus at {where} unreachable ({reason}, timeout {self.settings.timeout:g} s)"
                "; check prometheus_url and that the server is up"
            ) from exc
        except (ValueError, KeyError, json.JSONDecodeError) as exc:
            raise PrometheusHTTPError(
                f"Prometheus at {where} sent an unexpected answer to {shown(expr)}: {exc}"
            ) from exc

    def close(self) -> None:
        """Release pooled connections."""
        self._connect.close()


@functools.lru_cache(maxsize=32)
def _cached(settings: PrometheusSettings) -> PrometheusClient:
    return PrometheusClient(settings)


def client(
    configuration: Mapping[str, Any] | None = None,
    secrets: Mapping[str, Any] | None = None,
    *,
    timeout: float | None = None,
    retries: int | None = None,
) -> PrometheusClient:
    """The (cached) client for these configuration/secrets (timeout/retries overridable)."""
    settings = settings_from(configuration, secrets)
    if timeout is not None:
        settings = dataclasses.replace(settings, timeout=timeout)
    if retries is not None:
        settings = dataclasses.replace(settings, retries=retries)
    return _cached(settings)
