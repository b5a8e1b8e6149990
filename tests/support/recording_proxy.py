"""A tiny HTTP proxy that records request headers and forwards to a real server.

Used to see what chaos_ext sends (e.g. the bearer token) while the answers
still come from the real Prometheus behind it.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class RecordingProxy:
    server: ThreadingHTTPServer
    thread: threading.Thread
    headers: list[dict[str, str]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def start_recording_proxy(upstream: str) -> RecordingProxy:
    proxy: dict[str, Any] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            proxy["p"].headers.append(dict(self.headers.items()))
            try:
                with urllib.request.urlopen(upstream + self.path, timeout=5) as answer:  # noqa: S310
                    status, body = answer.status, answer.read()
            except urllib.error.HTTPError as exc:
                status, body = exc.code, exc.read()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    proxy["p"] = RecordingProxy(server, thread)
    return proxy["p"]  # type: ignore[no-any-return]
