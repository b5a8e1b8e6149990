"""Activities that end the way a row of docs/verdicts.md says, for every provider.

One behaviour, three providers: :func:`behave` (python), :func:`process_script`
(a real ``sh`` process) and :class:`BehaviourServer` (a real local HTTP server
on 127.0.0.1) each do the same thing for a mode:

* ``ok``: succeed (python True, exit 0, HTTP 200);
* ``fail``: a failing result (python False, exit 1, HTTP 500);
* ``raise``: an exception (python raises; the HTTP server resets the
  connection; a process has none);
* ``hang``: touch the marker, then sleep ``seconds`` (bounded) and succeed:
  the activity a signal, a stop condition or a provider timeout lands in.

``touch`` is a file created first (the method action leaves ``method-ran``,
a rollback ``rolled-back``), ``remove`` one deleted first (a rollback undoes
``method-ran``); with ``when="after"`` the activity only misbehaves while the
file ``ran`` exists, so a hypothesis probe can hold before the method and
misbehave after it, or only once the rollback ran (the recovery check).
:func:`leave_fault` records a ledger fault whose undo works or raises (the
ledger-sweep rows).
"""

from __future__ import annotations

import shlex
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

from chaos_ext._core.ledger import Entry, fault, undo_handler
from chaos_ext.errors import ChaosExtError

__all__ = ["BehaviourServer", "behave", "leave_fault", "process_script", "value"]

MAX_HANG_S = 30.0


def _misbehaves(when: str, ran: str) -> bool:
    return when != "after" or (bool(ran) and Path(ran).exists())


def behave(
    mode: str = "ok",
    touch: str = "",
    marker: str = "",
    ran: str = "",
    when: str = "always",
    seconds: float = MAX_HANG_S,
    remove: str = "",
) -> bool:
    """The python provider's behaviour (module docstring)."""
    if touch:
        Path(touch).touch()
    if remove:
        Path(remove).unlink(missing_ok=True)
    if not _misbehaves(when, ran):
        return True
    if marker:
        Path(marker).touch()
    if mode == "fail":
        return False
    if mode == "raise":
        raise ChaosExtError("the activity raised, as the row asks")
    if mode == "hang":
        time.sleep(min(seconds, MAX_HANG_S))
    return True


def process_script(
    mode: str = "ok",
    touch: str = "",
    marker: str = "",
    ran: str = "",
    when: str = "always",
    seconds: float = MAX_HANG_S,
    remove: str = "",
) -> str:
    """The ``sh -c`` script of the process provider's behaviour."""
    steps = []
    if touch:
        steps.append(f"touch {shlex.quote(touch)}")
    if remove:
        steps.append(f"rm -f {shlex.quote(remove)}")
    if when == "after":
        steps.append(f"[ -e {shlex.quote(ran)} ] || exit 0")
    if marker:
        steps.append(f"touch {shlex.quote(marker)}")
    if mode == "fail":
        steps.append("echo failing as the row asks >&2; exit 1")
    elif mode == "hang":
        steps.append(f"exec sleep {min(seconds, MAX_HANG_S):g}")
    else:
        steps.append("exit 0")
    return "; ".join(steps)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _metrics(self) -> None:
        lines = [
            f'verdict_row_started{{row="{row}"}} {int(Path(path).exists())}'
            for row, path in sorted(self.server.watched.items())
        ]
        body = ("\n".join(lines) + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if urlparse(self.path).path == "/metrics":
            self._metrics()
            return
        query = {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}
        if query.get("touch"):
            Path(query["touch"]).touch()
        if query.get("remove"):
            Path(query["remove"]).unlink(missing_ok=True)
        mode = query.get("mode", "ok")
        if not _misbehaves(query.get("when", "always"), query.get("ran", "")):
            mode = "ok"
        elif query.get("marker"):
            Path(query["marker"]).touch()
        if mode == "raise":  # a reset: no answer at all
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            return
        if mode == "hang":
            time.sleep(min(float(query.get("seconds", MAX_HANG_S)), MAX_HANG_S))
        code = 500 if mode == "fail" else 200
        body = b"failing as the row asks" if code == 500 else b"ok"
        try:
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            return  # the client gave up (a timeout or a signal): nothing to answer


class _Server(ThreadingHTTPServer):
    watched: dict[str, str]


class BehaviourServer:
    """The HTTP provider's behaviour on 127.0.0.1 (a real server, one thread per request).

    ``/metrics`` is a Prometheus exposition: ``verdict_row_started{row=ROW}`` is 1 once
    the marker file :meth:`watch` named exists, so a stop condition can breach exactly
    when an activity has started."""

    def __init__(self) -> None:
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.watched = {}
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> BehaviourServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def watch(self, row: str, marker: str) -> None:
        """Expose whether ``marker`` exists as ``verdict_row_started{row=...}``."""
        self.server.watched[row] = marker

    def url(self, **behaviour: Any) -> str:
        port = self.server.server_address[1]
        query = urlencode({k: v for k, v in behaviour.items() if v not in ("", None)})
        return f"http://127.0.0.1:{port}/behave?{query}"


def leave_fault(
    fail_undo: bool = False, undo_marker: str = "", undo_seconds: float = 0
) -> dict[str, Any]:
    """Record a fault in the ledger and leave it open for the sweep (its undo may raise;
    with ``undo_marker`` it touches the marker, then takes ``undo_seconds``: a signal
    can land in it)."""
    recipe = {"fail": fail_undo, "marker": undo_marker, "seconds": undo_seconds}
    with fault(kind="verdict-table", target="nothing", recipe=recipe, module=__name__) as entry:
        pass
    return {"ledger_id": entry.id}


@undo_handler("verdict-table")
def _undo(entry: Entry) -> str:
    if entry.recipe.get("fail"):
        raise ChaosExtError("this undo fails, as the row asks")
    if entry.recipe.get("marker"):
        Path(entry.recipe["marker"]).touch()
        time.sleep(min(float(entry.recipe.get("seconds") or 0), MAX_HANG_S))
        return "undone, slowly"
    return "nothing to undo"


def value(x: float) -> float:
    """A measurement that reads ``x`` (a probe whose value a test decides)."""
    return float(x)
