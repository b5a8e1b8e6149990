"""A Kubernetes API emulator over real HTTP, for the real ``kubernetes`` client and kubectl.

Built on kmock's ``KubernetesEmulator`` (in-memory objects served over HTTP by
aiohttp) with a thin server-side extension, :class:`ClusterEmulator`:

* discovery for the resources we use, with ``pods/eviction`` advertised as
  ``policy/v1 Eviction`` (what ``kubectl drain`` looks for before evicting);
* lists with ``kind``/``apiVersion``, ``labelSelector``, ``fieldSelector``
  and ``limit``/``continue`` pagination over a consistent snapshot;
* uid/resourceVersion/creationTimestamp stamped on created objects;
* ``POST .../pods/<name>/eviction`` with PodDisruptionBudgets, and the
  controllers of :mod:`support.k8s_cluster` (replacement pods, rollouts).

Two ways to run it:

* :func:`start` - in this process, on a background event loop thread. The
  handle gives thread-safe access to the cluster state (seed, inspect).
* :func:`start_process` - ``python -m support.k8s_emulator`` in its own process
  (its own CPU, survives anything the test kills), seeded from a JSON file.

Both write a kubeconfig that the real client (``KUBECONFIG``) and kubectl use.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import aiohttp.web
import attrs
import jsonpatch
import jsonpointer
import kmock
import pytest
from kmock._internal import rendering  # Request type for overrides

from support.k8s_cluster import KINDS, PODS, ClusterState, FollowUp, Res, res
from support.k8s_selectors import field_matcher, label_matcher

__all__ = [
    "ClusterEmulator",
    "EmulatorHandle",
    "emulator",
    "start",
    "start_process",
    "write_kubeconfig",
]

Obj = dict[str, Any]
T = TypeVar("T")
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_NAMESPACED = {k: k not in ("Node", "Namespace") for k in KINDS}
_MAX_RUNTIME_S = 900.0  # hard cap of an emulator process


@attrs.define(kw_only=True)
class ClusterEmulator(kmock.KubernetesEmulator):
    """kmock's emulator plus selectors, pagination, evictions and controllers."""

    ready_delay: float = 0.2
    rollout_delay: float = 0.2
    cluster: ClusterState = attrs.field(init=False)
    _snapshots: dict[int, list[Obj]] = attrs.field(factory=dict, init=False)
    _snapshot_ids: Any = attrs.field(factory=lambda: itertools.count(1), init=False)
    _timers: list[asyncio.TimerHandle] = attrs.field(factory=list, init=False)
    _encoded: dict[Any, tuple[str | None, bytes]] = attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for kind, (group, version, plural) in KINDS.items():
            key = f"{group}/{version}/{plural}" if group else f"{version}/{plural}"
            self.resources[key] = kmock.ResourceInfo(
                kind=kind,
                namespaced=_NAMESPACED[kind],
                verbs=_VERBS,
                singular=kind.lower(),
                subresources={"eviction", "status"} if kind == "Pod" else {"status"},
            )
        self.cluster = ClusterState(
            self.objects, ready_delay=self.ready_delay, rollout_delay=self.rollout_delay
        )

    # -- discovery -----------------------------------------------------------------------
    async def _serve_version(self, request: rendering.Request) -> rendering.Payload:
        payload: Any = await super()._serve_version(request)
        payload["groupVersion"] = payload["groupVersion"].lstrip("/")  # core is "v1"
        for item in payload.get("resources", []):
            if item["name"] == "pods/eviction":
                item.update(kind="Eviction", group="policy", version="v1", verbs=["create"])
            elif "/" in item["name"]:
                item["verbs"] = ["get", "patch", "update"]
        return payload

    # -- lists -----------------------------------------------------------------------------
    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        r = _res_of(request)
        kind = next((k for k, v in KINDS.items() if v == r), None)
        if kind is None:
            raise kmock.KubernetesResourceNotFoundError()
        params = request.params
        limit = int(params.get("limit") or 0)
        token = params.get("continue") or ""
        if token:
            snap, offset = (int(part) for part in token.split(":"))
            items = self._snapshots.get(snap)
            if items is None:
                message = "The provided continue parameter is too old"
                raise kmock.KubernetesError(status=410, reason="Expired", message=message)
        else:
            async with self._lock:
                by_label = label_matcher(params.get("labelSelector"))
                by_field = field_matcher(params.get("fieldSelector"))
                items = [
                    o
                    for o in self.cluster.items(r, request.namespace)
                    if by_label(o) and by_field(o)
                ]
            snap, offset = next(self._snapshot_ids), 0
        page = items[offset : offset + limit] if limit else items[offset:]
        meta: Obj = {"resourceVersion": str(self.cluster.resource_version)}
        end = offset + len(page)
        if limit and end < len(items):
            self._snapshots[snap] = items
            meta.update({"continue": f"{snap}:{end}", "remainingItemCount": len(items) - end})
        else:
            self._snapshots.pop(snap, None)
        group_version = f"{r[0]}/{r[1]}" if r[0] else r[1]
        head = {"kind": f"{kind}List", "apiVersion": group_version, "metadata": meta}
        body = json.dumps(head)[:-1].encode() + b', "items": ['
        body += b", ".join(self._encoded_object(r, o) for o in page) + b"]}"
        return aiohttp.web.Response(body=body, content_type="application/json")

    def _encoded_object(self, r: Res, obj: Obj) -> bytes:
        """An object's JSON, cached per resourceVersion (as the API server's watch cache does)."""
        meta = obj.get("metadata") or {}
        key = (r, meta.get("namespace"), meta.get("name"))
        version = meta.get("resourceVersion")
        cached = self._encoded.get(key)
        if cached is not None and version is not None and cached[0] == version:
            return cached[1]
        encoded = json.dumps(obj).encode()
        self._encoded[key] = (version, encoded)
        return encoded

    # -- writes ----------------------------------------------------------------------------
    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if request.resource is None:
            return await super()._handle(request)
        r = _res_of(request)
        if request.action == kmock.action.LIST and r[2]:  # not discovery (/apis/apps/v1)
            response: Any = await self._serve_list(request)
            return response  # prebuilt bytes: objects encoded once per resourceVersion
        if request.subresource == "eviction" and request.method == kmock.method.POST:
            return await self._serve_eviction(request)
        if request.action == kmock.action.CREATE and isinstance(request.data, dict):
            meta = request.data.setdefault("metadata", {})
            meta.setdefault("uid", _uuid())
            meta.setdefault("creationTimestamp", _now())
            meta["resourceVersion"] = str(self.cluster.resource_version)
            if request.namespace:
                meta.setdefault("namespace", request.namespace)
        if r[2] and request.name and request.action in _OBJECT_ACTIONS:
            return await self._serve_object(r, request)
        return await super()._handle(request)

    async def _serve_object(self, r: Res, request: rendering.Request) -> aiohttp.web.StreamResponse:
        """GET/PATCH/DELETE of one object, straight on kmock's store.

        Same semantics as kmock's own handlers (merge patch for objects, JSON
        patch for lists, soft deletion kept in the history, watch events), but
        without its per-request reaction matching, which costs ~0.1 s a request
        on a busy machine, and with the controllers' reactions.
        """
        key = (res(r), request.namespace, request.name or "")
        follow: list[FollowUp] = []
        async with self._lock:
            obj = self.objects[key] if key in self.objects else None  # noqa: SIM401 - no .get
            if obj is None or obj.deleted:
                return _status_response(404, "NotFound", f'{r[2]} "{request.name}" not found')
            if request.action == kmock.action.FETCH:
                return _json_bytes(self._encoded_object(r, obj.raw))
            before = copy.deepcopy(obj.raw)
            if request.action == kmock.action.DELETE:
                obj.delete()
                event, body = "DELETED", before
                follow = self.cluster.pod_deleted(before) if r == PODS else []
            else:
                try:
                    obj.patch(request.data)
                except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
                    return _status_response(422, "Invalid", f"the patch cannot apply: {exc}")
                except (ValueError, TypeError) as exc:
                    return _status_response(400, "BadRequest", f"the patch is malformed: {exc}")
                self.cluster.bump(r, request.namespace, obj.raw)
                event, body = "MODIFIED", obj.raw
                follow = self.cluster.after_patch(
                    r, before, self.cluster.get(r, request.namespace, request.name or "")
                )
            await self._buses[res(r)].put({"type": event, "object": body})
        self._schedule(follow)
        return _json_bytes(json.dumps(body).encode())

    async def _serve_eviction(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        body = request.data if isinstance(request.data, dict) else {}
        if body.get("kind") != "Eviction":
            status = {"kind": "Status", "code": 400, "message": "expected an Eviction"}
            return aiohttp.web.json_response(status, status=400)
        async with self._lock:
            code, payload, follow = self.cluster.evict(request.namespace or "", request.name or "")
        self._schedule(follow)
        return aiohttp.web.json_response(payload, status=code)

    # -- follow-ups (controllers acting later) ---------------------------------------------
    def _schedule(self, follow: list[FollowUp]) -> None:
        loop = asyncio.get_running_loop()
        for delay, callback in follow:
            self._timers.append(
                loop.call_later(delay, lambda cb=callback: loop.create_task(self._run(cb)))
            )

    async def _run(self, callback: Callable[[], list[FollowUp]]) -> None:
        async with self._lock:
            follow = callback()
        self._schedule(follow)

    async def apply(self, func: Callable[[ClusterState], T]) -> T:
        """Run ``func(cluster)`` with the lock held."""
        async with self._lock:
            return func(self.cluster)

    def cancel_timers(self) -> None:
        for timer in self._timers:
            timer.cancel()


_OBJECT_ACTIONS = (kmock.action.FETCH, kmock.action.UPDATE, kmock.action.DELETE)


def _json_bytes(body: bytes, status: int = 200) -> aiohttp.web.Response:
    return aiohttp.web.Response(body=body, status=status, content_type="application/json")


def _status_response(code: int, reason: str, message: str) -> aiohttp.web.Response:
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": message, "reason": reason, "code": code}  # fmt: skip
    return _json_bytes(json.dumps(status).encode(), code)


def _res_of(request: rendering.Request) -> Res:
    r = request.resource
    assert r is not None
    return (r.group or "", r.version or "", r.plural or "")


def _uuid() -> str:
    import uuid  # noqa: PLC0415 - tiny helper

    return str(uuid.uuid4())


def _now() -> str:
    from support.k8s_objects import rfc3339  # noqa: PLC0415 - tiny helper

    return rfc3339()


def write_kubeconfig(path: Path, url: str) -> Path:
    """A kubeconfig for the emulator (token auth over plain HTTP on loopback)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emulator", "cluster": {"server": url.rstrip("/")}}],
        "users": [{"name": "gameday", "user": {"token": "emulator-token"}}],
        "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "gameday"}}],
        "current-context": "emulator",
    }
    path.write_text(json.dumps(config, indent=2))
    return path


class EmulatorHandle:
    """A running emulator: ``url``, ``kubeconfig``, thread-safe state access, ``stop()``."""

    def __init__(self, kubeconfig: Path, *, ready_delay: float, rollout_delay: float) -> None:
        self.kubeconfig = kubeconfig
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._emulator: ClusterEmulator | None = None
        started: Future[str] = Future()
        self._thread = threading.Thread(
            target=self._loop.run_until_complete,
            args=(self._serve(started, ready_delay, rollout_delay),),
            name="k8s-emulator",
            daemon=True,
        )
        self._thread.start()
        self.url = started.result(timeout=30)
        write_kubeconfig(kubeconfig, self.url)

    async def _serve(self, started: Future[str], ready_delay: float, rollout: float) -> None:
        self._stop = asyncio.Event()
        try:
            emulator = ClusterEmulator(ready_delay=ready_delay, rollout_delay=rollout)
            async with emulator, kmock.Server(emulator) as server:
                self._emulator = emulator
                started.set_result(str(server.url))
                await asyncio.wait_for(self._stop.wait(), _MAX_RUNTIME_S)
                emulator.cancel_timers()
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)
            raise

    def call(self, func: Callable[[ClusterState], T], timeout: float = 30) -> T:
        """Run ``func(cluster)`` on the emulator's loop with its lock held."""
        assert self._emulator is not None
        return asyncio.run_coroutine_threadsafe(self._emulator.apply(func), self._loop).result(
            timeout
        )

    def put(self, *objects: Obj | Iterable[Obj]) -> None:
        flat: list[Obj] = []
        for item in objects:
            flat += [item] if isinstance(item, dict) else list(item)
        self.call(lambda c: [c.put(o) for o in flat] and None)

    def get(self, kind: str, ns: str | None, name: str) -> Obj | None:
        return self.call(lambda c: c.get(KINDS[kind], ns, name))

    def items(self, kind: str, ns: str | None = None) -> list[Obj]:
        return self.call(lambda c: [json.loads(json.dumps(o)) for o in c.items(KINDS[kind], ns)])

    def events(self, what: str | None = None) -> list[tuple[float, str, str]]:
        return self.call(lambda c: [e for e in c.events if what is None or e[1] == what])

    def set_injector(self, injector: Callable[[Obj, ClusterState], Obj] | None) -> None:
        def assign(cluster: ClusterState) -> None:
            cluster.injector = injector

        self.call(assign)

    def stop(self) -> None:
        if self._thread.is_alive() and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout=30)

    def __enter__(self) -> EmulatorHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start(
    kubeconfig: Path, *, ready_delay: float = 0.2, rollout_delay: float = 0.2
) -> EmulatorHandle:
    """Start the emulator in this process (background thread); write ``kubeconfig``."""
    return EmulatorHandle(kubeconfig, ready_delay=ready_delay, rollout_delay=rollout_delay)


class ProcessHandle:
    """An emulator in its own process (``python -m support.k8s_emulator``)."""

    def __init__(self, proc: subprocess.Popen[str], url: str, kubeconfig: Path) -> None:
        self.proc, self.url, self.kubeconfig = proc, url, kubeconfig

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def __enter__(self) -> ProcessHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_process(
    kubeconfig: Path,
    seed: Path | None = None,
    *,
    ready_delay: float = 0.2,
    rollout_delay: float = 0.2,
    timeout: float = 120,
) -> ProcessHandle:
    """Start the emulator in its own process, seeded with the objects of ``seed`` (a JSON list)."""
    argv = [
        sys.executable,
        "-m",
        "support.k8s_emulator",
        "--ready-delay",
        str(ready_delay),
        "--rollout-delay",
        str(rollout_delay),
    ]
    if seed is not None:
        argv += ["--seed", str(seed)]
    path = os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    ready: Future[str] = Future()
    threading.Thread(target=lambda: ready.set_result(proc.stdout.readline()), daemon=True).start()
    try:
        line = ready.result(timeout=timeout)
        url = json.loads(line)["url"]
    except Exception:
        proc.kill()
        proc.wait(timeout=10)
        raise
    write_kubeconfig(kubeconfig, url)
    return ProcessHandle(proc, url, kubeconfig)


async def _main(args: argparse.Namespace) -> None:
    emulator = ClusterEmulator(ready_delay=args.ready_delay, rollout_delay=args.rollout_delay)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    async with emulator, kmock.Server(emulator) as server:
        if args.seed:
            seeded = json.loads(Path(args.seed).read_text())
            await emulator.apply(lambda c: [c.put(o) for o in seeded] and None)
        print(json.dumps({"url": str(server.url)}), flush=True)  # noqa: T201 - the ready line
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), args.max_seconds)
        emulator.cancel_timers()


@pytest.fixture
def emulator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorHandle]:
    """An emulator in this process; ``KUBECONFIG`` points the real client at it.

    Use it from a conftest: ``from support.k8s_emulator import emulator``.
    """
    handle = start(tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(handle.kubeconfig))
    monkeypatch.delenv("KUBERNETES_CONTEXT", raising=False)
    try:
        yield handle
    finally:
        handle.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", help="JSON file: a list of objects to load")
    parser.add_argument("--ready-delay", type=float, default=0.2)
    parser.add_argument("--rollout-delay", type=float, default=0.2)
    parser.add_argument("--max-seconds", type=float, default=_MAX_RUNTIME_S)
    asyncio.run(_main(parser.parse_args()))
