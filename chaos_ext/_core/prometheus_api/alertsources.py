"""Alerts that are already firing: Prometheus's ``/api/v1/alerts`` and Alertmanager's API v2.

Alertmanager settings come from the Chaos Toolkit configuration and secrets,
like Prometheus's:

=============================  ==============================================
configuration key              meaning
=============================  ==============================================
``alertmanager_url``           base URL, e.g. ``http://alertmanager.monitoring:9093``
``alertmanager_timeout_seconds``       seconds per request (default: the watch's timeout)
``alertmanager_verify_tls``    ``false`` to skip certificate checks (default true)
``alertmanager_ca_file``       CA bundle for the server certificate
=============================  ==============================================

Secrets: ``alertmanager_token`` (bearer) or ``alertmanager_username`` +
``alertmanager_password`` (basic auth), never logged.

Only one read-only endpoint is needed (``GET /api/v2/alerts?active=true
&silenced=false&inhibited=false``), so it is one ``requests`` call with a
timeout rather than a generated OpenAPI client. Failures are raised as
:class:`~chaos_ext.errors.PrometheusUnreachable` /
:class:`~chaos_ext.errors.PrometheusHTTPError` (the monitoring stack did not
answer), which an abort watch counts towards ``unreachable_after``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import requests

from chaos_ext._core.prometheus_api.alertwatch import ExternalAlert
from chaos_ext._core.prometheus_api.client import PrometheusClient, go_time
from chaos_ext.errors import InvalidArgument, PrometheusHTTPError, PrometheusUnreachable

__all__ = ["alertmanager_alerts", "alertmanager_url", "firing_since", "prometheus_alerts"]


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")


def firing_since(active_at: float, for_s: float, interval_s: float) -> float:
    """When Prometheus turned an alert active since ``active_at`` to firing: its first
    evaluation at least ``for`` later (evaluations every ``interval_s`` from ``active_at``,
    which is itself an evaluation time)."""
    if for_s <= 0:
        return active_at
    if interval_s <= 0:
        return active_at + for_s
    return active_at + math.ceil(round(for_s / interval_s, 6)) * interval_s


def _rule_alert(rule: Mapping[str, Any], alert: Mapping[str, Any]) -> ExternalAlert:
    labels = {str(k): str(v) for k, v in (alert.get("labels") or {}).items()}
    summary = str((alert.get("annotations") or {}).get("summary", ""))
    state = str(alert.get("state", ""))
    try:
        active_at = go_time(str(alert.get("activeAt", "")))
    except ValueError:  # no time given: say nothing rather than something wrong
        return ExternalAlert("prometheus", labels, state, "", summary)
    fired = firing_since(
        active_at, float(rule.get("duration") or 0), float(rule.get("interval") or 0)
    )
    since = _iso(fired) if state == "firing" else ""
    return ExternalAlert("prometheus", labels, state, since, summary, _iso(active_at))


def prometheus_alerts(prom: PrometheusClient) -> list[ExternalAlert]:
    """Pending and firing alerts of Prometheus's own rule evaluation, with their real
    times: pending since ``activeAt``, firing since the first evaluation ``for`` later
    (``/api/v1/rules``: ``/api/v1/alerts`` gives ``activeAt`` only, not ``for``)."""
    return [
        _rule_alert(rule, alert)
        for rule in prom.alerting_rules()
        for alert in rule.get("alerts") or []
    ]


def _setting(source: Mapping[str, Any] | None, key: str) -> str:
    if not source:
        return ""
    scoped = source.get("alertmanager")
    if isinstance(scoped, Mapping) and scoped.get(key):
        return str(scoped[key])
    return str(source.get(key) or "")


def alertmanager_url(configuration: Mapping[str, Any] | None) -> str:
    """The configured Alertmanager URL (refused when missing or not http(s))."""
    url = _setting(configuration, "alertmanager_url").strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise InvalidArgument(
            f"configuration alertmanager_url={url!r} is not an http(s) URL; set it, e.g. "
            "--var alertmanager_url=http://127.0.0.1:9093"
        )
    return url


def _request_options(
    configuration: Mapping[str, Any] | None, secrets: Mapping[str, Any] | None
) -> dict[str, Any]:
    options: dict[str, Any] = {}
    verify = _setting(configuration, "alertmanager_verify_tls").lower()
    ca_file = _setting(configuration, "alertmanager_ca_file")
    options["verify"] = False if verify in ("0", "false", "no", "off") else (ca_file or True)
    token = _setting(secrets, "alertmanager_token")
    if token:
        options["headers"] = {"Authorization": f"Bearer {token}"}
    username, password = (
        _setting(secrets, k) for k in ("alertmanager_username", "alertmanager_password")
    )
    if username:
        options["auth"] = (username, password)
    return options


def alertmanager_alerts(
    configuration: Mapping[str, Any] | None,
    secrets: Mapping[str, Any] | None,
    timeout: float = 5.0,
) -> list[ExternalAlert]:
    """Active alerts in Alertmanager that no silence or inhibition suppresses."""
    url = alertmanager_url(configuration)
    params = {"active": "true", "silenced": "false", "inhibited": "false"}
    seconds = float(_setting(configuration, "alertmanager_timeout_seconds") or timeout)
    options = _request_options(configuration, secrets)
    try:
        response = requests.get(f"{url}/api/v2/alerts", params=params, timeout=seconds, **options)
    except requests.RequestException as exc:
        raise PrometheusUnreachable(
            f"Alertmanager at {url} unreachable ({type(exc).__name__}); check alertmanager_url"
        ) from exc
    if response.status_code >= 400:
        raise PrometheusHTTPError(
            f"Alertmanager at {url} answered HTTP {response.status_code}: "
            f"{' '.join(response.text.split())[:200]}"
        )
    try:
        body = response.json()
        return [_from_alertmanager(a) for a in body]
    except (ValueError, TypeError, AttributeError) as exc:
        raise PrometheusHTTPError(f"Alertmanager at {url} sent an unexpected answer") from exc


def _from_alertmanager(alert: Mapping[str, Any]) -> ExternalAlert:
    status = alert.get("status") or {}
    suppressed = (
        status.get("state") == "suppressed" or status.get("silencedBy") or status.get("inhibitedBy")
    )
    return ExternalAlert(
        "alertmanager",
        {str(k): str(v) for k, v in (alert.get("labels") or {}).items()},
        "suppressed" if suppressed else "firing",
        str(alert.get("startsAt", "")),
        str((alert.get("annotations") or {}).get("summary", "")),
    )
