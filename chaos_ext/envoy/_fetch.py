"""Fetch a ``/config_dump``: from an admin URL, a file, or a Kubernetes pod.

Sources (see :func:`parse_source`):

* ``http://host:15000`` (or ``https://``): GET ``<url>/config_dump`` with httpx;
* ``pod://NAMESPACE/NAME`` or ``pod://NAMESPACE?selector=istio=ingressgateway``
  (first running pod by name), optional ``&container=`` (default ``istio-proxy``):
  exec ``pilot-agent request GET config_dump`` in the Istio sidecar/gateway
  container through the Kubernetes API (the admin port listens on 127.0.0.1
  inside the pod, so the API server's pods/proxy cannot reach it);
* ``-``: standard input (a dump or a bootstrap piped in);
* anything else (or ``file://PATH``): a file holding a saved dump or a bootstrap.

Every network step has a deadline; failures raise EnvoyError, bad source strings
InvalidArgument.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import httpx

from chaos_ext.envoy.errors import EnvoyError
from chaos_ext.errors import InvalidArgument

__all__ = ["EXEC_COMMAND", "MAX_DUMP_BYTES", "DumpSource", "fetch_dump", "parse_source"]

MAX_DUMP_BYTES = 512 * 1024 * 1024
"""A dump larger than this is refused (protects the runner's memory)."""
EXEC_COMMAND = ("pilot-agent", "request", "GET", "config_dump")
DEFAULT_CONTAINER = "istio-proxy"
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_SELECTOR = re.compile(r"^[A-Za-z0-9_./=,!() -]{1,256}$")
T = TypeVar("T")


@dataclass(frozen=True)
class DumpSource:
    """A parsed ``source`` argument."""

    kind: str  # "url" | "file" | "pod" | "stdin"
    location: str  # URL of /config_dump, file path, or "namespace/name"
    namespace: str = ""
    pod: str = ""
    selector: str = ""
    container: str = DEFAULT_CONTAINER


def _pod_source(source: str) -> DumpSource:
    parts = urlsplit(source)
    namespace, pod = parts.netloc, parts.path.strip("/")
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    selector, container = query.get("selector", ""), query.get("container", DEFAULT_CONTAINER)
    for label, value in (("namespace", namespace), ("pod", pod), ("container", container)):
        if (value or label == "namespace") and not _DNS1123.match(value):
            raise InvalidArgument(f"source: {label} {value!r} in {source!r} is not a valid name")
    if bool(pod) == bool(selector):
        raise InvalidArgument(
            f"source: {source!r}: give a pod (pod://NAMESPACE/NAME) or a label selector "
            "(pod://NAMESPACE?selector=istio=ingressgateway), not both or neither"
        )
    if selector and not _SELECTOR.match(selector):
        raise InvalidArgument(f"source: label selector {selector!r} is not valid")
    where = f"{namespace}/{pod or '?selector=' + selector}"
    return DumpSource("pod", where, namespace, pod, selector, container)


def parse_source(source: str) -> DumpSource:
    """Classify ``source`` (pure); InvalidArgument quoting it when it is malformed."""
    if not isinstance(source, str) or not source.strip():
        raise InvalidArgument(
            "source: empty; give http://host:15000, a file, '-' (stdin) or pod://NS/NAME"
        )
    source = source.strip()
    if source == "-":
        return DumpSource("stdin", "-")
    scheme = urlsplit(source).scheme.lower()
    if scheme in ("http", "https"):
        parts = urlsplit(source)
        if not parts.hostname:
            raise InvalidArgument(f"source: {source!r} has no host")
        base = source.split("?", 1)[0].rstrip("/")
        url = base if base.endswith("/config_dump") else base + "/config_dump"
        return DumpSource("url", url)
    if scheme == "pod":
        return _pod_source(source)
    if scheme == "file":
        return DumpSource("file", urlsplit(source).path)
    if len(scheme) > 1:  # "c:" style drive letters are not a concern here; other schemes are
        raise InvalidArgument(
            f"source: unknown scheme {scheme!r} in {source!r}; use http(s)://, pod://, file:// "
            "or a plain file path"
        )
    return DumpSource("file", source)


def _read_file(path: str) -> bytes:
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > MAX_DUMP_BYTES:
            raise EnvoyError(f"{path}: {size} bytes is more than the {MAX_DUMP_BYTES} limit")
        return file.read_bytes()
    except OSError as exc:
        raise InvalidArgument(f"source: cannot read {path!r}: {exc.strerror or exc}") from None


def _read_stdin() -> bytes:
    import sys  # noqa: PLC0415 - only this source reads it

    body = sys.stdin.buffer.read(MAX_DUMP_BYTES + 1)
    if len(body) > MAX_DUMP_BYTES:
        raise EnvoyError(f"stdin: more than {MAX_DUMP_BYTES} bytes")
    if not body.strip():
        raise InvalidArgument("source '-': standard input is empty; pipe a dump or a bootstrap in")
    return body


def _read_url(url: str, timeout: float) -> bytes:
    body = bytearray()
    try:
        with (
            httpx.Client(timeout=timeout, follow_redirects=False) as client,
            client.stream("GET", url) as response,
        ):
            if response.status_code != httpx.codes.OK:
                response.read()
                raise EnvoyError(
                    f"{url}: HTTP {response.status_code} {response.reason_phrase}: "
                    f"{response.text[:200].strip()!r}; is this an Envoy admin port?"
                )
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_DUMP_BYTES:
                    raise EnvoyError(f"{url}: dump larger than {MAX_DUMP_BYTES} bytes")
    except httpx.TimeoutException as exc:
        raise EnvoyError(f"{url}: no answer within {timeout:g} s ({type(exc).__name__})") from exc
    except httpx.HTTPError as exc:
        raise EnvoyError(
            f"cannot reach the Envoy admin at {url}: {exc}; for a pod, run "
            "`kubectl port-forward POD 15000` or use source pod://NAMESPACE/NAME"
        ) from exc
    return bytes(body)


def _with_deadline(func: Callable[[], T], seconds: float, what: str) -> T:
    """Run a blocking call that has no timeout of its own in a thread, with a deadline."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = func()
        except Exception as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=target, name="envoy-exec-connect", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise EnvoyError(f"{what}: no answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


def _pick_pod(core: Any, src: DumpSource) -> str:
    from chaos_ext._core.k8s import call  # noqa: PLC0415 - see _read_pod

    if src.pod:
        return src.pod
    pods = call(
        core.list_namespaced_pod,
        src.namespace,
        label_selector=src.selector,
        what=f"list pods {src.namespace}/{src.selector}",
        error=EnvoyError,
    )
    running = sorted(
        p.metadata.name for p in pods.items if (p.status and p.status.phase) == "Running"
    )
    if not running:
        raise EnvoyError(f"no running pod in {src.namespace} matches selector {src.selector!r}")
    return str(running[0])


def _exec_frames(sock: Any, deadline: float) -> tuple[bytes, bytes, bytes]:
    """(stdout, stderr, status) of a Kubernetes exec stream (channel byte + data frames)."""
    from websocket import (  # noqa: PLC0415 - only pod sources need it
        ABNF,
        WebSocketConnectionClosedException,
        WebSocketException,
    )

    channels = {1: bytearray(), 2: bytearray(), 3: bytearray()}
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise EnvoyError("exec config_dump: deadline passed while reading the output")
        sock.settimeout(left)
        try:
            opcode, frame = sock.recv_data_frame(True)
        except WebSocketConnectionClosedException:
            break
        except (WebSocketException, OSError) as exc:  # timeouts included
            raise EnvoyError(f"exec config_dump: reading the output failed: {exc}") from exc
        if opcode == ABNF.OPCODE_CLOSE:
            break
        data = frame.data if isinstance(frame.data, bytes) else str(frame.data).encode()
        if len(data) > 1 and data[0] in channels:
            channels[data[0]] += data[1:]
            if len(channels[1]) > MAX_DUMP_BYTES:
                raise EnvoyError(f"exec config_dump: output larger than {MAX_DUMP_BYTES} bytes")
    return bytes(channels[1]), bytes(channels[2]), bytes(channels[3])


def _exec_status(status: bytes, stderr: bytes, what: str) -> None:
    if not status:
        raise EnvoyError(f"{what}: the exec stream ended without an exit status")
    try:
        doc = json.loads(status)
    except json.JSONDecodeError:
        doc = {"status": "Failure", "message": status.decode("utf-8", "replace")}
    if doc.get("status") != "Success":
        detail = (doc.get("message") or "").strip()
        tail = stderr.decode("utf-8", "replace").strip()[-300:]
        raise EnvoyError(f"{what} failed: {detail or 'non-zero exit'}; stderr: {tail or '(empty)'}")


def _read_pod(
    src: DumpSource, timeout: float, secrets: Mapping[str, Any] | None
) -> tuple[bytes, str]:
    from kubernetes import client  # noqa: PLC0415 - only pod sources need the client
    from kubernetes.config.config_exception import ConfigException  # noqa: PLC0415
    from kubernetes.stream import stream  # noqa: PLC0415

    from chaos_ext._core.k8s import api_client, call  # noqa: PLC0415 - ~0.5 s of imports

    try:
        core = client.CoreV1Api(api_client(secrets))
    except (ConfigException, OSError) as exc:
        raise EnvoyError(f"pod source: no usable Kubernetes configuration: {exc}") from exc
    name = _pick_pod(core, src)
    what = f"exec {' '.join(EXEC_COMMAND)} in {src.namespace}/{name}:{src.container}"
    pod = call(
        core.read_namespaced_pod,
        name,
        src.namespace,
        what=f"read pod {src.namespace}/{name}",
        error=EnvoyError,
    )
    containers = [c.name for c in (pod.spec.containers if pod.spec else [])]
    if src.container not in containers:
        raise EnvoyError(
            f"pod {src.namespace}/{name} has no container {src.container!r} "
            f"(it has {', '.join(containers) or 'none'}); add ?container=NAME to the source"
        )
    deadline = time.monotonic() + timeout

    def connect() -> Any:
        return call(
            stream,
            core.connect_get_namespaced_pod_exec,
            name,
            src.namespace,
            command=list(EXEC_COMMAND),
            container=src.container,
            stderr=True,
            stdin=False,
            stdout=True,
            tty=False,
            binary=True,
            _preload_content=False,
            what=what,
            error=EnvoyError,
        )

    ws = _with_deadline(connect, timeout, what)
    try:
        stdout, stderr, status = _exec_frames(ws.sock, deadline)
    except BaseException:
        ws.sock.shutdown()  # no close handshake with a peer that stopped answering
        raise
    ws.close(timeout=1)
    _exec_status(status, stderr, what)
    return stdout, f"pod://{src.namespace}/{name}"


def fetch_dump(
    source: DumpSource, *, timeout: float, secrets: Mapping[str, Any] | None = None
) -> tuple[bytes, str]:
    """The raw ``/config_dump`` body from ``source``, and what it was read from
    (the URL, the file, or ``pod://NAMESPACE/NAME`` of the pod a selector chose)."""
    if source.kind == "url":
        return _read_url(source.location, timeout), source.location
    if source.kind == "pod":
        return _read_pod(source, timeout, secrets)
    if source.kind == "stdin":
        return _read_stdin(), "stdin"
    return _read_file(source.location), source.location
