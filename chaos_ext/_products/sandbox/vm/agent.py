"""Guest side of the micro-VM: run the host's requests, write results to the share.

Started by ``boot.sh`` inside the VM (``python -m chaos_ext._products.sandbox.vm.agent SHARE``).
The share (a writable 9p folder, the same directory on the host) holds:

* ``req/<id>.json``: ``{"argv": [...], "env": {...}, "cwd": "...", "timeout": s}``
  written atomically by the host; the agent starts it at once.
* ``out/<id>.out`` / ``out/<id>.err``: the command's stdout/stderr, as it runs.
* ``res/<id>.json``: ``{"exit_code": n, "timed_out": bool, "seconds": s}`` when done.
* ``req/<id>.kill``: the host asks for the command to be stopped (SIGTERM, then SIGKILL).
* ``req/shutdown``: stop everything and exit (the VM then powers off).
* ``ready.json``: written once the agent runs (kernel release, python).

Every command has a time cap (its ``timeout``, at most the agent's own cap).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]

POLL = 0.05
POLL_IDLE = 0.5
"""Polling backs off from POLL to POLL_IDLE while nothing new arrives: under emulation each
look at the share costs the host CPU (about 10 % of a core at a steady 50 ms)."""
MAX_COMMAND_SECONDS = 3600.0


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _run(share: Path, cid: str, request: dict[str, Any], procs: dict[str, Any]) -> None:
    started = time.monotonic()
    timeout = min(float(request.get("timeout", MAX_COMMAND_SECONDS)), MAX_COMMAND_SECONDS)
    env = {**os.environ, **{str(k): str(v) for k, v in request.get("env", {}).items()}}
    result: dict[str, Any] = {"exit_code": None, "timed_out": False}
    with (
        (share / "out" / f"{cid}.out").open("wb") as out,
        (share / "out" / f"{cid}.err").open("wb") as err,
    ):
        try:
            proc = subprocess.Popen(
                [str(a) for a in request["argv"]],
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                cwd=request.get("cwd") or None,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            err.write(f"cannot start {request['argv'][:1]}: {exc}\n".encode())
            result["exit_code"] = 127
        else:
            procs[cid] = proc
            try:
                result["exit_code"] = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                result["timed_out"] = True
                _stop(proc)
                result["exit_code"] = proc.wait()
            procs.pop(cid, None)
    result["seconds"] = round(time.monotonic() - started, 3)
    _write_json(share / "res" / f"{cid}.json", result)


def _stop(proc: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def main(share: Path) -> int:
    """Serve requests from ``share`` until ``req/shutdown`` appears."""
    for sub in ("req", "out", "res"):
        (share / sub).mkdir(exist_ok=True)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=False, timeout=10)
    _write_json(
        share / "ready.json",
        {"kernel": platform.release(), "python": sys.version.split()[0], "pid": os.getpid()},
    )
    procs: dict[str, subprocess.Popen[bytes]] = {}
    seen: set[str] = set()
    pause, listed = POLL, [""]
    while True:
        names = sorted(p.name for p in (share / "req").iterdir())
        if "shutdown" in names:
            break
        pause = POLL if names != listed else min(pause * 1.5, POLL_IDLE)
        listed = names
        for name in names:
            if name.endswith(".json") and name not in seen:
                seen.add(name)
                cid = name[: -len(".json")]
                request = json.loads((share / "req" / name).read_text())
                threading.Thread(
                    target=_run, args=(share, cid, request, procs), daemon=True
                ).start()
            elif name.endswith(".kill") and name not in seen:
                proc = procs.get(name[: -len(".kill")])
                if proc is not None:
                    seen.add(name)
                    threading.Thread(target=_stop, args=(proc,), daemon=True).start()
        time.sleep(pause)
    for proc in list(procs.values()):
        _stop(proc, grace=2.0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))
