"""kmock's Kubernetes emulator, plus the pods/exec websocket subresource, in a thread.

kmock (an in-memory Kubernetes API over real HTTP) has no exec. This adds it at
the protocol level the real client speaks: a websocket upgrade of
``GET /api/v1/namespaces/NS/pods/NAME/exec?command=...`` with the
``v4.channel.k8s.io`` subprotocol, frames prefixed by a channel byte (1 stdout,
2 stderr, 3 status as a metav1.Status JSON), as kube-apiserver sends them.
What a command prints is scripted by the test (``ExecEmulator.script``); the
pod must exist in the emulator (create it with the real client), else 404.

``running_emulator()`` serves it on 127.0.0.1:<free port> from a background
event loop, so synchronous code (the kubernetes client) can call it.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp.web
import kmock

_EXEC = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)/exec$")
_CHUNK = 32 * 1024


@dataclass
class ExecResult:
    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int = 0
    hang: bool = False  # accept the stream and never answer (deadline tests)


@dataclass
class ExecCall:
    namespace: str
    pod: str
    container: str
    command: list[str]


@dataclass
class _State:
    script: dict[tuple[str, str], ExecResult] = field(default_factory=dict)
    calls: list[ExecCall] = field(default_factory=list)


def _status(result: ExecResult) -> bytes:
    if result.exit_code == 0:
        return json.dumps({"metadata": {}, "status": "Success"}).encode()
    return json.dumps(
        {
            "metadata": {},
            "status": "Failure",
            "message": "command terminated with non-zero exit code: "
            f"exit status {result.exit_code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(result.exit_code)}]},
        }
    ).encode()


class ExecEmulator(kmock.KubernetesEmulator):  # type: ignore[misc]
    """KubernetesEmulator that also serves pods/exec over websocket."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.exec_state = _State()

    async def __call__(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        match = _EXEC.match(raw.path)
        if match is None or raw.headers.get("Upgrade", "").lower() != "websocket":
            response: aiohttp.web.StreamResponse = await super().__call__(raw)
            return response
        return await self._exec(raw, match["ns"], match["name"])

    async def _exec(
        self, raw: aiohttp.web.BaseRequest, namespace: str, pod: str
    ) -> aiohttp.web.StreamResponse:
        query = raw.rel_url.query
        self.exec_state.calls.append(
            ExecCall(namespace, pod, query.get("container", ""), query.getall("command", []))
        )
        result = self.exec_state.script.get((namespace, pod))
        if result is None:
            body = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "code": 404,
                "reason": "NotFound",
                "message": f'pods "{pod}" not found',
            }
            return aiohttp.web.json_response(body, status=404)
        ws = aiohttp.web.WebSocketResponse(protocols=("v4.channel.k8s.io",))
        await ws.prepare(raw)  # type: ignore[arg-type]
        if result.hang:
            await asyncio.sleep(3600)
        for channel, data in ((1, result.stdout), (2, result.stderr)):
            for start in range(0, len(data), _CHUNK):
                await ws.send_bytes(bytes([channel]) + data[start : start + _CHUNK])
        await ws.send_bytes(b"\x03" + _status(result))
        await ws.close()
        return ws


@dataclass
class RunningEmulator:
    url: str
    handler: ExecEmulator

    def script(self, namespace: str, pod: str, result: ExecResult) -> None:
        self.handler.exec_state.script[(namespace, pod)] = result

    @property
    def exec_calls(self) -> list[ExecCall]:
        return list(self.handler.exec_state.calls)


@contextmanager
def running_emulator(timeout: float = 10.0) -> Iterator[RunningEmulator]:
    """Serve an ExecEmulator from a background thread until the block ends."""
    ready: dict[str, Any] = {}
    started = threading.Event()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def serve() -> None:
        try:
            async with ExecEmulator() as handler, kmock.Server(handler) as server:
                ready["emulator"] = RunningEmulator(str(server.url).rstrip("/"), handler)
                started.set()
                await stop.wait()
        except BaseException as exc:
            ready["error"] = exc
            started.set()
            raise

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    try:
        if not started.wait(timeout) or "error" in ready:
            raise RuntimeError(f"kmock did not start: {ready.get('error')!r}")
        yield ready["emulator"]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout)
        loop.close()
