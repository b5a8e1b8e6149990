"""A controllable HTTP target (aiohttp) for the load tests (test-only: not in the package).

``start()`` runs ``python -m support.servers.http_target`` on 127.0.0.1 (a
free port unless given; optionally inside a network namespace through a
command prefix). Every path answers ``200 ok`` after the current latency
(``/chunked`` in three chunks; ``/close`` then closes the connection), except
the control endpoints, which are not counted:

* ``POST /_control/latency?ms=N[&spread_ms=M]``: add N ms before every answer
  (plus a uniform random 0..M ms each: a latency distribution whose
  percentiles the server sets, e.g. to compare two load generators);
* ``POST /_control/pause?ms=N``: stall N ms from now: every request that
  arrives meanwhile is answered only when the stall ends (a GC pause, a
  failover);
* ``POST /_control/errors?status=503&every=N[&cause=C]``: answer ``status`` to every
  N-th request (0 turns it off), with ``X-Error-Cause: C`` if given;
* ``GET /_control/stats``: ``{"requests": n, "errors": n, "in_flight": n,
  "body_bytes": n, "methods": {...}, "first_at": t, "last_at": t,
  "per_second": {"<unix second>": arrivals}}``;
* ``POST /_control/reset``: latency 0, no errors, counters 0.

Python API: the handle's ``set_latency``, ``set_errors``, ``stats``, ``reset``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from chaos_ext._products.sandbox.servers._stoppable import Stoppable

__all__ = ["HttpTarget", "start"]

_CONTROL = "/_control/"


class _State:
    def __init__(self) -> None:
        self.latency = 0.0
        self.spread = 0.0
        self.random = random.Random(7)
        self.error_status = 0
        self.every = 0
        self.cause = ""
        self.requests = 0
        self.errors = 0
        self.in_flight = 0
        self.paused_until = 0.0
        self.per_second: dict[int, int] = {}
        self.first_at = self.last_at = 0.0
        self.body_bytes = 0
        self.methods: dict[str, int] = {}


async def _answer(request: web.Request) -> web.StreamResponse:
    if request.path == "/chunked":
        stream = web.StreamResponse()
        stream.enable_chunked_encoding()
        await stream.prepare(request)
        for part in (b"one ", b"two ", b"three"):
            await stream.write(part)
        await stream.write_eof()
        return stream
    if request.path == "/close":
        return web.Response(text="ok, closing", headers={"Connection": "close"})
    return web.Response(text="ok")


async def _serve(request: web.Request) -> web.StreamResponse:
    state: _State = request.app["state"]
    state.requests += 1
    state.methods[request.method] = state.methods.get(request.method, 0) + 1
    state.body_bytes += len(await request.read())
    now = time.time()
    state.first_at = state.first_at or now
    state.last_at = now
    second = int(now)
    state.per_second[second] = state.per_second.get(second, 0) + 1
    state.in_flight += 1
    try:
        stall = state.paused_until - asyncio.get_running_loop().time()
        if stall > 0:
            await asyncio.sleep(stall)
        delay = state.latency + (state.random.uniform(0, state.spread) if state.spread else 0.0)
        if delay:
            await asyncio.sleep(delay)
        if state.every and state.requests % state.every == 0:
            state.errors += 1
            headers = {"X-Error-Cause": state.cause} if state.cause else None
            return web.Response(status=state.error_status, text="injected error", headers=headers)
        return await _answer(request)
    finally:
        state.in_flight -= 1


async def _control(request: web.Request) -> web.Response:
    state: _State = request.app["state"]
    action = request.path[len(_CONTROL) :]
    query = request.query
    if action == "latency":
        state.latency = float(query.get("ms", "0")) / 1000
        state.spread = float(query.get("spread_ms", "0")) / 1000
    elif action == "pause":
        state.paused_until = asyncio.get_running_loop().time() + float(query.get("ms", "0")) / 1000
    elif action == "errors":
        state.error_status = int(query.get("status", "503"))
        state.every = int(query.get("every", "0"))
        state.cause = query.get("cause", "")
    elif action == "reset":
        request.app["state"] = _State()
    elif action != "stats":
        return web.Response(status=404, text="unknown control")
    state = request.app["state"]
    return web.json_response(
        {
            "requests": state.requests,
            "errors": state.errors,
            "in_flight": state.in_flight,
            "latency_ms": state.latency * 1000,
            "every": state.every,
            "first_at": state.first_at,
            "last_at": state.last_at,
            "body_bytes": state.body_bytes,
            "methods": state.methods,
            "per_second": {str(k): v for k, v in sorted(state.per_second.items())[-600:]},
        }
    )


async def _dispatch(request: web.Request) -> web.StreamResponse:
    if request.path.startswith(_CONTROL):
        return await _control(request)
    return await _serve(request)


async def _main(port: int) -> None:
    app = web.Application()
    app["state"] = _State()
    app.router.add_route("*", "/{tail:.*}", _dispatch)
    runner = web.AppRunner(app, access_log=None, handle_signals=True)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    site = web.SockSite(runner, sock, backlog=1024)
    await site.start()
    sys.stdout.write(json.dumps({"port": sock.getsockname()[1]}) + "\n")
    sys.stdout.flush()
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


@dataclass
class HttpTarget(Stoppable):
    """A running target: ``url``, ``port``, control methods, ``stop()``."""

    port: int
    proc: subprocess.Popen[str] = field(repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def _control(self, action: str, method: str = "POST") -> dict[str, Any]:
        request = urllib.request.Request(f"{self.url}_control/{action}", method=method)  # noqa: S310 - our loopback server
        with urllib.request.urlopen(request, timeout=5) as resp:  # noqa: S310
            data: dict[str, Any] = json.loads(resp.read())
        return data

    def set_latency(self, ms: float, spread_ms: float = 0.0) -> None:
        self._control(f"latency?ms={ms}&spread_ms={spread_ms}")

    def pause(self, ms: float) -> None:
        self._control(f"pause?ms={ms}")

    def set_errors(self, status: int, every: int, cause: str = "") -> None:
        self._control(f"errors?status={status}&every={every}&cause={cause}")

    def stats(self) -> dict[str, Any]:
        return self._control("stats", "GET")

    def reset(self) -> None:
        self._control("reset")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def start(*, port: int = 0, prefix: Sequence[str] = (), ready_timeout: float = 15.0) -> HttpTarget:
    """Start the target and wait until it listens."""
    tests = str(Path(__file__).resolve().parents[2])  # `-m support.servers.http_target`
    path = os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-m", __name__, "--port", str(port)],
        env={**os.environ, "PYTHONPATH": path},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    target = HttpTarget(port=port, proc=proc)
    try:
        assert proc.stdout is not None
        line = _readline(proc, ready_timeout)
        target.port = int(json.loads(line)["port"])
    except Exception:
        target.stop()
        raise
    return target


def _readline(proc: subprocess.Popen[str], timeout: float) -> str:
    import selectors  # noqa: PLC0415

    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise TimeoutError(f"http target not ready within {timeout:g} s")
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"http target exited with {proc.wait(timeout=5)}")
    return line


def _cli() -> None:
    parser = argparse.ArgumentParser(description="controllable HTTP target")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        try:
            import uvloop  # noqa: PLC0415 - optional accelerator
        except ImportError:
            asyncio.run(_main(args.port))
        else:
            uvloop.run(_main(args.port))


if __name__ == "__main__":
    _cli()
