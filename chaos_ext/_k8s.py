"""The one place that builds Kubernetes API clients and converts their errors.

Connection settings follow chaostoolkit-kubernetes (``create_k8s_api_client``),
so experiments written for it work unchanged: ``~/.kube/config`` (or
``KUBECONFIG``) with ``KUBERNETES_CONTEXT``; in a pod with
``CHAOSTOOLKIT_IN_POD=true``; else ``KUBERNETES_HOST`` plus
``KUBERNETES_API_KEY`` / ``KUBERNETES_VERIFY_SSL`` ..., looked up in the
activity's ``secrets`` first, then the environment. Unlike
``create_k8s_api_client``, every client gets its own ``Configuration``: the
kubernetes module's defaults (default configuration, default kubeconfig
path) are never changed, so two activities with different contexts, or the
code embedding us, do not see each other's settings.

Every call made through :func:`call` (and :func:`read_json` / :func:`list_items`,
which return the API's JSON as dicts, page by page) has :data:`REQUEST_TIMEOUT` and raises
:class:`chaos_ext.errors.KubernetesError` (or the given subclass) instead of the
client's own exceptions.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any, TypeVar

import urllib3
from chaosk8s import create_k8s_api_client
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.config import incluster_config, kube_config

from chaos_ext._jsonlist import stream_items
from chaos_ext.errors import ChaosExtError, KubernetesError

__all__ = [
    "REQUEST_TIMEOUT",
    "api_client",
    "call",
    "iter_items",
    "list_items",
    "parse_time",
    "read_json",
    "status_of",
]

REQUEST_TIMEOUT: tuple[float, float] = (5.0, 30.0)
"""(connect, read) seconds for every Kubernetes API call."""

T = TypeVar("T")


def api_client(secrets: Mapping[str, Any] | None = None) -> client.ApiClient:
    """An ApiClient configured from secrets/environment (see module docstring)."""
    values = dict(secrets or {})

    def lookup(key: str) -> Any:
        return values.get(key, os.environ.get(key))

    configuration = client.Configuration()
    # $KUBECONFIG is read now, not when kubernetes was imported (it may hold several paths)
    config_file = os.environ.get("KUBECONFIG") or "~/.kube/config"
    if any(os.path.exists(os.path.expanduser(p)) for p in config_file.split(os.pathsep)):
        kube_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=config_file,
            context=lookup("KUBERNETES_CONTEXT"),
            client_configuration=configuration,
        )
    elif os.environ.get("CHAOSTOOLKIT_IN_POD") == "true":
        incluster_config.load_incluster_config(  # type: ignore[no-untyped-call]
            client_configuration=configuration
        )
    else:  # chaosk8s builds a fresh Configuration from KUBERNETES_* in this case
        api: client.ApiClient = create_k8s_api_client(values)
        return api
    configuration.debug = lookup("KUBERNETES_DEBUG") not in (None, False)
    if os.environ.get("HTTP_PROXY"):
        configuration.proxy = os.environ["HTTP_PROXY"]
    if os.environ.get("NO_PROXY"):
        configuration.no_proxy = os.environ["NO_PROXY"]
    return client.ApiClient(configuration)


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


def read_json(
    func: Callable[..., Any],
    *args: Any,
    what: str,
    error: type[ChaosExtError] = KubernetesError,
    **kwargs: Any,
) -> dict[str, Any]:
    """Call a client method and return the answer as a plain dict (the API's JSON).

    ``_preload_content=False`` keeps the client's HTTP, auth, timeout and error
    handling but skips its model classes: activities work on the manifests
    as the API returns them and give back JSON-friendly results.
    """
    response = call(func, *args, what=what, error=error, _preload_content=False, **kwargs)
    try:
        body = json.loads(response.data or b"{}")
    except ValueError as exc:
        raise error(f"{what}: the Kubernetes API answered something that is not JSON") from exc
    if not isinstance(body, dict):
        raise error(f"{what}: expected a JSON object from the Kubernetes API")
    return body


def iter_items(
    func: Callable[..., Any],
    *args: Any,
    what: str,
    page_size: int = 500,
    error: type[ChaosExtError] = KubernetesError,
    **kwargs: Any,
) -> Iterator[dict[str, Any]]:
    """Every item of a list call, as dicts, fetched ``page_size`` at a time (limit/continue).

    A generator: each item is decoded on its own as it is reached
    (:mod:`chaos_ext._jsonlist`), so a caller that keeps only what it needs of
    each item holds one page's text and one item in memory, and the garbage
    collector never has to walk a whole decoded page.
    """
    token = ""
    for _ in range(_MAX_PAGES):
        page_args = {**kwargs, "limit": page_size}
        if token:
            page_args["_continue"] = token
        response = call(func, *args, what=what, error=error, _preload_content=False, **page_args)
        envelope: dict[str, Any] = {}
        try:
            yield from stream_items((response.data or b"{}").decode("utf-8"), envelope)
        except ValueError as exc:  # UnicodeDecodeError is one too
            raise error(f"{what}: the Kubernetes API answered a list that is not JSON") from exc
        token = (envelope.get("metadata") or {}).get("continue") or ""
        if not token:
            return
    raise error(f"{what}: more than {_MAX_PAGES} pages of {page_size}; narrow the selection")


def list_items(
    func: Callable[..., Any],
    *args: Any,
    what: str,
    page_size: int = 500,
    error: type[ChaosExtError] = KubernetesError,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """Every item of a list call, as a list of dicts (see :func:`iter_items`)."""
    return list(iter_items(func, *args, what=what, page_size=page_size, error=error, **kwargs))


_MAX_PAGES = 10_000


def parse_time(text: str | None) -> datetime | None:
    """A Kubernetes RFC 3339 time (``Z`` or offset); None if empty or unparseable."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
