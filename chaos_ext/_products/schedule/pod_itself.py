"""URLs that would point at the runner's own pod once scheduled (pure).

An experiment written on a laptop or for the sandbox often defaults its
``prometheus_url`` to ``http://127.0.0.1:9090``. In the CronJob's pod,
``127.0.0.1`` and ``localhost`` are the pod itself, where nothing listens: every
run would be ``unsteady`` (or fail) without a word about why. ``gameday
schedule`` warns about each such URL the run would use: a ``--var`` value, a
value written in an experiment's configuration, or the default of an
environment value (``{"type": "env", "key": ..., "default": ...}``) that no
``--var`` overrides.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["pod_itself_warnings", "points_at_the_pod"]

_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}
_EXAMPLE = "http://<service>.<namespace>.svc:<port>"


def points_at_the_pod(value: Any) -> str | None:
    """The host of an http(s) URL that is the pod itself (loopback, unspecified), else None."""
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        return None
    try:
        host = urlsplit(value).hostname
    except ValueError:
        return None
    if host is None:
        return None
    if host.lower() in _NAMES or host.lower().endswith(".localhost"):
        return host
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    return host if address.is_loopback or address.is_unspecified else None


def _given(name: str, key: str, value: Any) -> tuple[Any, str]:
    """The URL the run would use for one configuration key, and where it comes from."""
    if isinstance(value, Mapping) and value.get("type") == "env":
        env = value.get("key")
        return value.get("default"), (
            f"the default of ${env}, which the pod does not set unless a Secret of "
            "--env-from-secret does"
        )
    return value, f"written in {name}"


def pod_itself_warnings(
    experiments: Mapping[str, Mapping[str, Any]], run_vars: Mapping[str, str]
) -> list[str]:
    """One line per URL that the scheduled run would send to its own pod.

    ``experiments``: file name -> experiment; ``run_vars``: the ``--var`` values
    passed to ``gameday run`` (name -> value), which override the configuration.
    """
    found = []
    for key, value in run_vars.items():
        host = points_at_the_pod(value)
        if host:
            found.append(
                f"--var {key}={value}: in the pod, {host} is the pod itself, where nothing "
                f"listens; give the service's address, e.g. --var {key}={_EXAMPLE}"
            )
    for name, experiment in experiments.items():
        configuration = experiment.get("configuration")
        for key, declared in (
            (configuration or {}).items() if isinstance(configuration, Mapping) else ()
        ):
            if key in run_vars:
                continue
            url, source = _given(name, key, declared)
            host = points_at_the_pod(url)
            if host:
                found.append(
                    f"{name}: {key} is {url} ({source}): in the pod, {host} is the pod "
                    f"itself, where nothing listens; give --var {key}={_EXAMPLE}"
                )
    return found
