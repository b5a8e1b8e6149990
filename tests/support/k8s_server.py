"""The HTTP side of the Kubernetes API emulator: kmock's emulator plus a thin extension.

:class:`ClusterEmulator` serves kmock's in-memory objects over real HTTP and adds
what our activities and kubectl need from a real API server:

* discovery for the resources we use, with ``pods/eviction`` advertised as
  ``policy/v1 Eviction`` (what ``kubectl drain`` looks for before evicting);
* lists with ``kind``/``apiVersion``, ``labelSelector``, ``fieldSelector``
  and ``limit``/``continue`` pagination over a consistent snapshot, each
  object's JSON cached per resourceVersion (as the watch cache does);
* uid/resourceVersion/creationTimestamp stamped on created objects, a new
  resourceVersion on every change;
* ``POST .../pods/<name>/eviction`` with PodDisruptionBudgets, and the
  controllers of :mod:`support.k8s_cluster` (replacement pods, rollouts);
* SelfSubjectAccessReviews, answered by :mod:`support.k8s_authorizer` (a test
  double of the RBAC authorizer: kmock itself allows every request).

Run it with :mod:`support.k8s_emulator`.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import aiohttp.web
import attrs
import jsonpatch
import jsonpointer
import kmock
from kmock._internal import rendering  # Request type for overrides

from support.k8s_authorizer import review_response
from support.k8s_cluster import KINDS, PODS, ClusterState, FollowUp, Res, res
from support.k8s_jobs import JOBS, job_created, job_deleted
from support.k8s_objects import rfc3339
from support.k8s_selectors import field_matcher, label_matcher

__all__ = ["ClusterEmulator"]

Obj = dict[str, Any]
T = TypeVar("T")
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_NAMESPACED = {k: k not in ("Node", "Namespace") for k in KINDS}


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
        apart = await self._served_apart(request)
        if apart is not None:
            return apart
        r = _res_of(request)
        if r[2] and request.action is not None:  # what was asked of the API, for RBAC checks
            sub = f"/{request.subresource}" if request.subresource else ""
            verb = _VERB_OF.get(request.action.value, request.action.value.lower())
            self.cluster.api_calls.append(f"{verb} {r[0]}/{r[2]}{sub} {request.namespace or ''}")
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
        response = await super()._handle(request)
        if r == JOBS and request.action == kmock.action.CREATE and isinstance(request.data, dict):
            job = request.data
            self._schedule([(0.0, lambda: job_created(self.cluster, job))])
        return response

    async def _served_apart(self, request: rendering.Request) -> aiohttp.web.Response | None:
        """What kmock would serve wrongly: a namespace by name, access reviews (else None)."""
        if _is_namespace_get(request):
            return await self._serve_namespace(request)
        if _res_of(request) == _ACCESS_REVIEWS and request.method == kmock.method.POST:
            return await self._serve_access_review(request)
        return None

    async def _serve_access_review(self, request: rendering.Request) -> aiohttp.web.Response:
        """A SelfSubjectAccessReview, answered by the authorizer double; nothing is stored.

        Not in ``api_calls``: creating one needs no permission (``system:basic-user``).
        """
        body = request.data if isinstance(request.data, dict) else {}
        async with self._lock:
            answer = review_response(self.cluster.authorizer, body)
        return aiohttp.web.json_response(answer, status=201)

    async def _serve_namespace(self, request: rendering.Request) -> aiohttp.web.Response:
        """GET /api/v1/namespaces/NAME (kmock parses it as a list in namespace NAME)."""
        name = request.url.path.rsplit("/", 1)[1]
        self.cluster.api_calls.append(f"get /namespaces  {name}")  # cluster-scoped, by name
        async with self._lock:
            obj = self.cluster.get(KINDS["Namespace"], None, name)
        if obj is None:
            return _status_response(404, "NotFound", f'namespaces "{name}" not found')
        return _json_bytes(self._encoded_object(KINDS["Namespace"], obj))

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
                if r == JOBS:  # garbage collection of its pods, as the body's policy says
                    job_deleted(self.cluster, before, _propagation(request))
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


_ACCESS_REVIEWS = ("authorization.k8s.io", "v1", "selfsubjectaccessreviews")
_OBJECT_ACTIONS = (kmock.action.FETCH, kmock.action.UPDATE, kmock.action.DELETE)
_VERB_OF = {kmock.action.FETCH.value: "get", kmock.action.UPDATE.value: "patch"}


def _json_bytes(body: bytes, status: int = 200) -> aiohttp.web.Response:
    return aiohttp.web.Response(body=body, status=status, content_type="application/json")


def _status_response(code: int, reason: str, message: str) -> aiohttp.web.Response:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return _json_bytes(json.dumps(status).encode(), code)


def _res_of(request: rendering.Request) -> Res:
    r = request.resource
    assert r is not None
    return (r.group or "", r.version or "", r.plural or "")


def _is_namespace_get(request: rendering.Request) -> bool:
    parts = request.url.path.strip("/").split("/")
    return (
        request.method == kmock.method.GET
        and len(parts) == 4
        and parts[:3] == ["api", "v1", "namespaces"]
    )


def _propagation(request: rendering.Request) -> str:
    """A DELETE's propagationPolicy (body or query); the API's default for Jobs is Orphan."""
    body = request.data if isinstance(request.data, dict) else {}
    return str(body.get("propagationPolicy") or request.params.get("propagationPolicy") or "Orphan")


def _uuid() -> str:
    return str(uuid.uuid4())


def _now() -> str:
    return rfc3339()
