"""The one place that builds Kubernetes API clients and converts their errors.

Connection settings follow chaostoolkit-kubernetes (``create_k8s_api_client``),
so experiments written for it work unchanged: ``~/.kube/config`` (or
``KUBECONFIG``, or the command's ``--kubeconfig``:
:class:`~chaos_ext._core.settings.Settings`) with ``KUBERNETES_CONTEXT`` (the
activity's secrets, else the command's ``--context``, else the environment); in a
pod with ``CHAOSTOOLKIT_IN_POD=true``; else ``KUBERNETES_HOST`` plus
``KUBERNETES_API_KEY`` / ``KUBERNETES_VERIFY_SSL`` ..., looked up in the
activity's ``secrets`` first, then the environment. With none of them, a
:class:`~chaos_ext.errors.NoClusterCredentials` (a ``KubernetesError``) says so in one line,
naming each place looked at (chaosk8s would
try ``localhost:80`` three times). Unlike
``create_k8s_api_client``, every client gets its own ``Configuration``: the
kubernetes module's defaults (default configuration, default kubeconfig
path) are never changed, so two activities with different contexts, or the
code embedding us, do not see each other's settings.

Every call made through :func:`call` (and :func:`read_json` / :func:`list_items`,
which return the API's JSON as dicts, page by page) has :data:`REQUEST_TIMEOUT` and raises
:class:`chaos_ext.errors.KubernetesError` (or the given subclass) instead of the
client's own exceptions.

Cluster identity: a fault recorded in the ledger names its cluster by
:func:`cluster_identity` (the API server URL, the context, and the uid of the
``kube-system`` namespace: created once with the cluster, never shared by two).
:func:`undo_api_client` reconnects for an undo and refuses, with
:class:`chaos_ext.errors.TargetMismatch`, when the credentials at hand reach
another cluster. ``gameday rollback --kubeconfig/--context`` supplies others.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Generator, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

import urllib3
from chaosk8s import create_k8s_api_client
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.config import incluster_config, kube_config
from kubernetes.config.config_exception import ConfigException

from chaos_ext._core.jsonlist import stream_items
from chaos_ext._core.rbac import Rule
from chaos_ext._core.settings import current_settings
from chaos_ext.errors import ChaosExtError, KubernetesError, NoClusterCredentials, TargetMismatch

__all__ = [
    "IDENTITY_RULE",
    "REQUEST_TIMEOUT",
    "PageDecoder",
    "api_client",
    "call",
    "cluster_identity",
    "iter_items",
    "list_items",
    "parse_time",
    "read_json",
    "status_of",
    "undo_api_client",
]

REQUEST_TIMEOUT: tuple[float, float] = (5.0, 30.0)
"""(connect, read) seconds for every Kubernetes API call."""

T = TypeVar("T")
PageDecoder = Callable[[bytes], "tuple[Iterator[dict[str, Any]], str] | None"]
"""A list page's bytes -> its items and ``continue`` token (None: decode it as usual)."""

IDENTITY_RULE = Rule(
    "", "namespaces", ("get",), cluster_scoped=True, resource_names=("kube-system",)
)
"""What reading the cluster's identity needs (every action recording a Kubernetes fault)."""


def api_client(secrets: Mapping[str, Any] | None = None) -> client.ApiClient:
    """An ApiClient configured from secrets/environment (see module docstring)."""
    values = dict(secrets or {})

    def lookup(key: str) -> Any:
        return values.get(key, os.environ.get(key))

    configuration = client.Configuration()
    # read now, not when kubernetes was imported ($KUBECONFIG may hold several paths)
    config_file = _kubeconfig()
    if any(os.path.exists(os.path.expanduser(p)) for p in config_file.split(os.pathsep)):
        kube_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=config_file,
            # the activity's secrets, else the command's --context, else the environment
            context=values.get("KUBERNETES_CONTEXT")
            or current_settings().context
            or os.environ.get("KUBERNETES_CONTEXT"),
            client_configuration=configuration,
        )
    elif os.environ.get("CHAOSTOOLKIT_IN_POD") == "true":
        incluster_config.load_incluster_config(  # type: ignore[no-untyped-call]
            client_configuration=configuration
        )
    elif lookup("KUBERNETES_HOST"):  # chaosk8s builds a Configuration from KUBERNETES_*
        api: client.ApiClient = create_k8s_api_client(values)
        return api
    else:  # chaosk8s would talk to localhost:80 and retry three times: say it once
        raise NoClusterCredentials(_no_cluster(config_file))
    configuration.debug = lookup("KUBERNETES_DEBUG") not in (None, False)
    if os.environ.get("HTTP_PROXY"):
        configuration.proxy = os.environ["HTTP_PROXY"]
    if os.environ.get("NO_PROXY"):
        configuration.no_proxy = os.environ["NO_PROXY"]
    return client.ApiClient(configuration)


def _no_cluster(config_file: str) -> str:
    """One line: every place a cluster was looked for, and why each gave none."""
    flag, env = current_settings().kubeconfig, os.environ.get("KUBECONFIG")
    if flag:
        tried = [f"--kubeconfig {flag} (does not exist)"]
    elif env:
        tried = [f"--kubeconfig (not given), $KUBECONFIG {env} (does not exist)"]
    else:
        tried = [f"--kubeconfig (not given), $KUBECONFIG (not set), {config_file} (does not exist)"]
    pod = (
        " (KUBERNETES_SERVICE_HOST is set: a pod?)"
        if os.environ.get("KUBERNETES_SERVICE_HOST")
        else ""
    )
    tried.append(f"in-cluster (CHAOSTOOLKIT_IN_POD=true not set{pod})")
    tried.append("KUBERNETES_HOST (not set)")
    return (
        f"no kubeconfig found: tried {', '.join(tried)}; give --kubeconfig FILE "
        "[--context NAME], set CHAOSTOOLKIT_IN_POD=true in a pod, or KUBERNETES_HOST and "
        "KUBERNETES_API_KEY"
    )


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


def _stream_page(
    data: bytes, what: str, error: type[ChaosExtError]
) -> Generator[dict[str, Any], None, str]:
    """The items of one page, decoded one at a time; returns its ``continue`` token."""
    envelope: dict[str, Any] = {}
    try:
        yield from stream_items(data.decode("utf-8"), envelope)
    except ValueError as exc:  # UnicodeDecodeError is one too
        raise error(f"{what}: the Kubernetes API answered a list that is not JSON") from exc
    return str((envelope.get("metadata") or {}).get("continue") or "")


def _at_once(fetch: Callable[[str], bytes], token: str) -> Future[bytes]:
    """``fetch(token)`` in this thread, as a completed future."""
    done: Future[bytes] = Future()
    try:
        done.set_result(fetch(token))
    except Exception as exc:  # noqa: BLE001 - handed on: result() raises it
        done.set_exception(exc)
    return done


def iter_items(
    func: Callable[..., Any],
    *args: Any,
    what: str,
    page_size: int = 500,
    error: type[ChaosExtError] = KubernetesError,
    decode: PageDecoder | None = None,
    **kwargs: Any,
) -> Iterator[dict[str, Any]]:
    """Every item of a list call, as dicts, fetched ``page_size`` at a time (limit/continue).

    A generator: each item is decoded on its own as it is reached
    (:mod:`chaos_ext._core.jsonlist`), so a caller that keeps only what it needs of
    each item holds one page's text and one item in memory, and the garbage
    collector never has to walk a whole decoded page. ``decode`` (the page's
    bytes -> its items and ``continue`` token, or None to fall back to the
    standard decoding) lets a caller decode only the fields it reads; with it,
    the next page is fetched in a worker thread while the caller works through
    this one (one request in flight, each with its timeout).
    """

    def fetch(token: str) -> bytes:
        page_args = {**kwargs, "limit": page_size}
        if token:
            page_args["_continue"] = token
        response = call(func, *args, what=what, error=error, _preload_content=False, **page_args)
        return response.data or b"{}"

    with contextlib.ExitStack() as stack:
        pool = None if decode is None else stack.enter_context(ThreadPoolExecutor(1))
        submit = pool.submit if pool is not None else _at_once
        pending = submit(fetch, "")
        for _ in range(_MAX_PAGES):
            data = pending.result()
            lean = decode(data) if decode is not None else None
            if lean is not None:
                items, token = lean
                if token:
                    pending = submit(fetch, token)  # while this page is worked through
                yield from items
            else:
                token = yield from _stream_page(data, what, error)
                if token:
                    pending = submit(fetch, token)
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


def _given_kubeconfig() -> str | None:
    """The command's ``--kubeconfig`` (its Settings), else ``$KUBECONFIG``; None if neither."""
    return current_settings().kubeconfig or os.environ.get("KUBECONFIG") or None


def _kubeconfig() -> str:
    """The kubeconfig in use (one path or a list, as kubectl takes it), else ``~/.kube/config``."""
    return _given_kubeconfig() or os.path.expanduser("~/.kube/config")


def _contexts() -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """(contexts, active context) of the kubeconfig in use; empty if it cannot be read."""
    try:
        found = kube_config.list_kube_config_contexts(_kubeconfig())  # type: ignore[no-untyped-call]
    except (ConfigException, OSError, ValueError):
        return [], None
    return list(found[0] or []), found[1]


def _context_name(secrets: Mapping[str, Any] | None) -> str | None:
    """The kubeconfig context in use (None in a pod or with ``KUBERNETES_HOST``)."""
    wanted = (
        (secrets or {}).get("KUBERNETES_CONTEXT")
        or current_settings().context
        or os.environ.get("KUBERNETES_CONTEXT")
    )
    if wanted:
        return str(wanted)
    _, active = _contexts()
    return str(active.get("name")) if active else None


def _cluster_uid(api: client.ApiClient, what: str) -> str:
    core = client.CoreV1Api(api)
    body = read_json(core.read_namespace, "kube-system", what=what)
    uid = (body.get("metadata") or {}).get("uid")
    if not uid:
        raise KubernetesError(f"{what}: the namespace kube-system has no uid")
    return str(uid)


def cluster_identity(api: client.ApiClient, secrets: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ledger identity of the cluster ``api`` reaches (needs :data:`IDENTITY_RULE`).

    Raises KubernetesError, before anything is injected, when it cannot be read.
    """
    uid = _cluster_uid(
        api, "read namespace kube-system (the cluster's identity, recorded before any change)"
    )
    kubeconfig = _given_kubeconfig()
    return {
        "scope": "kubernetes",
        "cluster": {
            "server": api.configuration.host,
            "uid": uid,
            "context": _context_name(secrets),
            "kubeconfig": kubeconfig,
        },
    }


def _known_context(name: str | None) -> bool:
    if not name:
        return False
    contexts, _ = _contexts()
    return any(c.get("name") == name for c in contexts)


def undo_api_client(identity: Mapping[str, Any] | None) -> client.ApiClient:
    """A client for undoing a fault in the cluster ``identity`` names, or TargetMismatch.

    Credentials: ``gameday rollback --context`` if given, else the recorded
    context if the current kubeconfig has it, else the current default. The
    cluster they reach must have the recorded kube-system uid.
    """
    given = current_settings()
    override = given.context
    cluster = (
        (identity or {}).get("cluster") if (identity or {}).get("scope") == "kubernetes" else None
    )
    if cluster is None:
        if not (override or given.kubeconfig):
            raise TargetMismatch(
                "this entry does not record which cluster it was made in (an older gameday):"
                " name it with `gameday rollback --kubeconfig FILE --context NAME`"
            )
        return api_client({"KUBERNETES_CONTEXT": override} if override else {})
    recorded = cluster.get("context")
    context = override or (recorded if _known_context(recorded) else None)
    api = api_client({"KUBERNETES_CONTEXT": context} if context else {})
    reached = _cluster_uid(api, f"read namespace kube-system at {api.configuration.host}")
    if reached != cluster.get("uid"):
        raise TargetMismatch(
            f"the fault was made in cluster {cluster.get('server')} (kube-system uid"
            f" {cluster.get('uid')}, context {recorded!r}, kubeconfig"
            f" {cluster.get('kubeconfig') or 'default'}), but the credentials at hand (context"
            f" {context or _context_name(None)!r}) reach {api.configuration.host} (kube-system"
            f" uid {reached}): refusing to undo it there. Give the recorded cluster's"
            " credentials: gameday rollback --kubeconfig FILE --context NAME"
        )
    return api
