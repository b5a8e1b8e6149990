"""The one place that builds Kubernetes API clients and converts their errors.

Connection settings follow chaostoolkit-kubernetes (``create_k8s_api_client``),
so experiments written for it work unchanged: ``~/.kube/config`` (or
``KUBECONFIG``) with ``KUBERNETES_CONTEXT``; in a pod with
``CHAOSTOOLKIT_IN_POD=true``; else ``KUBERNETES_HOST`` plus
``KUBERNETES_API_KEY`` / ``KUBERNETES_VERIFY_SSL`` ..., looked up in the
activity's ``secrets`` first, then the environment.

Every call made through :func:`call` has :data:`REQUEST_TIMEOUT` and raises
:class:`chaos_ext.errors.KubernetesError` (or the given subclass) instead of the
client's own exceptions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import urllib3
from chaosk8s import create_k8s_api_client
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from chaos_ext.errors import ChaosExtError, KubernetesError

__all__ = ["REQUEST_TIMEOUT", "api_client", "call", "status_of"]

REQUEST_TIMEOUT: tuple[float, float] = (5.0, 30.0)
"""(connect, read) seconds for every Kubernetes API call."""

T = TypeVar("T")


def api_client(secrets: Mapping[str, Any] | None = None) -> client.ApiClient:
    """An ApiClient configured from secrets/environment (see module docstring)."""
    api: client.ApiClient = create_k8s_api_client(dict(secrets or {}))
    return api


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of a Kubernetes API error, if it has one."""
    return exc.status if isinstance(exc, ApiException) else None


def call(
    func: Callable[..., T],
    *args: Any,
    what: str,
    error: type[ChaosExtError] = KubernetesError,
    **kwargs: Any,
) -> T:
    """Call a client method with the default timeout; convert its errors.

    ``what`` says what was being done ("evict pod shop/web-1"); it starts the message.
    """
    kwargs.setdefault("_request_timeout", REQUEST_TIMEOUT)
    try:
        return func(*args, **kwargs)
    except ApiException as exc:
        reason = (exc.reason or "").strip()
        raise error(f"{what}: HTTP {exc.status} {reason}".rstrip()) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise error(f"{what}: cannot reach the Kubernetes API: {exc}") from exc
