"""Helper process: hold a listening socket until stopped or the time cap."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

from chaos_ext._core.helper import serve


def work(
    payload: dict[str, Any], ready: Callable[[dict[str, Any]], None], stop: threading.Event
) -> None:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", int(payload["port"])))
        sock.listen(16)
        ready({"listening": payload["port"]})
        stop.wait(float(payload["seconds"]))


if __name__ == "__main__":
    serve(work)
