"""A Kubernetes API emulator over real HTTP, for the real ``kubernetes`` client and kubectl.

The server is :class:`support.k8s_server.ClusterEmulator` (kmock's in-memory
emulator plus selectors, pagination, evictions with PodDisruptionBudgets,
controllers and rollouts). Two ways to run it:

* :func:`start` - in this process, on a background event loop thread. The
  handle gives thread-safe access to the cluster state (seed, inspect). The
  pytest fixture :func:`emulator` wraps it (``from support.k8s_emulator import
  emulator`` in a conftest) and points ``KUBECONFIG`` at it.
* :func:`start_process` - ``python -m support.k8s_emulator`` in its own process
  (its own CPU, survives anything the test kills), seeded from a JSON file.

Both write a kubeconfig that the real client (``KUBECONFIG``) and kubectl use.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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

import kmock
import pytest

from support import k8s_objects as objs
from support.k8s_authorizer import AllowRule
from support.k8s_cluster import KINDS, ClusterState
from support.k8s_server import ClusterEmulator

__all__ = [
    "ClusterEmulator",
    "EmulatorHandle",
    "ProcessHandle",
    "emulator",
    "start",
    "start_process",
    "write_kubeconfig",
]

Obj = dict[str, Any]
T = TypeVar("T")
_MAX_RUNTIME_S = 900.0  # hard cap of an emulator process


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
                await _seed_system(emulator)
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

    def api_calls(self) -> list[str]:
        """Every API request served: ``"verb group/resource namespace"``."""
        return self.call(lambda c: list(c.api_calls))

    def allow(self, *rules: AllowRule) -> None:
        """Answer access reviews from ``rules`` only (none given: deny all); see k8s_authorizer."""

        def assign(cluster: ClusterState) -> None:
            cluster.authorizer.rules = list(rules)

        self.call(assign)

    def access_reviews(self) -> list[str]:
        """Every access review answered: ``"verb group/resource namespace name -> allowed"``."""
        return self.call(lambda c: list(c.authorizer.reviews))

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


async def _seed_system(emulator: ClusterEmulator) -> None:
    """What every real cluster has from its start: the kube-system namespace (with a uid).

    Its uid is the cluster's identity for the fault ledger; each emulator gets its own.
    """
    await emulator.apply(lambda c: c.put(objs.namespace("kube-system")) and None)


async def _main(args: argparse.Namespace) -> None:
    emulator = ClusterEmulator(ready_delay=args.ready_delay, rollout_delay=args.rollout_delay)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    async with emulator, kmock.Server(emulator) as server:
        await _seed_system(emulator)
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
