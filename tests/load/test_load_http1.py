"""The HTTP/1.1 client against a real server: chunked, Connection: close, HEAD, POST, mixes."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.servers import nginx
from support.servers.http_target import HttpTarget

from chaos_ext._core.helper import find_helpers
from chaos_ext.errors import InvalidArgument
from chaos_ext.load._http1 import build_request
from chaos_ext.load.driver import background_load, load_results, start_load, wait_load
from chaos_ext.load.errors import LoadError
from chaos_ext.load.spec import spec_from_arguments


def _run(token: str, results: Path, **arguments: Any) -> dict[str, Any]:
    spec = spec_from_arguments({"duration_seconds": 1, "rate": 40, **arguments})
    with background_load(spec, results_dir=results, token=token):
        assert wait_load(token, timeout=20, results_dir=results)
    return load_results(results, include_buckets=False)


def test_request_bytes() -> None:
    data = build_request("POST", "http://h:81/p?q=1", {"X-Token": "t"}, "abc")
    assert data == (
        b"POST /p?q=1 HTTP/1.1\r\nHost: h:81\r\nUser-Agent: gameday-load/1\r\n"
        b"X-Token: t\r\nContent-Length: 3\r\n\r\nabc"
    )
    assert build_request("GET", "http://h/", {"User-Agent": "me"}, "").startswith(
        b"GET / HTTP/1.1\r\nHost: h\r\nUser-Agent: me\r\n\r\n"
    )


def test_chunked_close_head_post_and_several_urls(
    target: HttpTarget, load_token: Callable[[], str], tmp_path: Path
) -> None:
    base = target.url
    chunked = _run(load_token(), tmp_path / "chunked", urls=[f"{base}chunked"])
    closing = _run(load_token(), tmp_path / "close", urls=[f"{base}close"])
    head = _run(load_token(), tmp_path / "head", urls=[base], method="HEAD")
    post = _run(
        load_token(),
        tmp_path / "post",
        urls=[f"{base}a", f"{base}b?x=1"],
        method="POST",
        body="x" * 100,
        headers={"X-Test": "1"},
    )
    for result in (chunked, closing, head, post):
        assert result["ok"] == 40, {k: result[k] for k in ("errors", "dropped", "status")}
    stats = target.stats()
    assert stats["requests"] == 160
    assert stats["methods"] == {"GET": 80, "HEAD": 40, "POST": 40}
    assert stats["body_bytes"] == 40 * 100


def test_a_server_that_answers_garbage_is_an_error(
    load_token: Callable[[], str], tmp_path: Path
) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    port = server.getsockname()[1]
    done = threading.Event()

    def answer_garbage() -> None:
        server.settimeout(0.2)
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(4096)
                conn.sendall(b"this is not HTTP\r\n\r\n")

    thread = threading.Thread(target=answer_garbage, daemon=True)
    thread.start()
    try:
        result = _run(load_token(), tmp_path, urls=[f"http://127.0.0.1:{port}/"], rate=10)
    finally:
        done.set()
        thread.join(5)
        server.close()
    assert result["ok"] == 0
    assert result["errors"]["other"] + result["errors"]["connect"] == 10
    assert result["errors"]["other"] >= 1  # the parser refused the answer


def test_https_verifies_certificates(load_token: Callable[[], str], tmp_path: Path) -> None:
    with nginx.start(tls=True) as server:
        trusted = _run(
            load_token(), tmp_path / "ok", urls=[server.url], ca_file=str(server.ca_file)
        )
        untrusted = _run(load_token(), tmp_path / "no", urls=[server.url], rate=10)
    assert trusted["ok"] == 40, trusted["errors"]
    assert untrusted["ok"] == 0
    assert untrusted["errors"]["connect"] == 10  # certificate verify failed


def test_http2_over_tls_by_alpn(load_token: Callable[[], str], tmp_path: Path) -> None:
    with nginx.start(tls=True, http2=True) as server:
        result = _run(
            load_token(), tmp_path, urls=[server.url], http2=True, ca_file=str(server.ca_file)
        )
    assert result["ok"] == 40, result["errors"]


def test_a_missing_ca_file_is_refused_before_anything_starts(tmp_path: Path) -> None:
    spec = spec_from_arguments({"urls": ["https://127.0.0.1:9/"], "ca_file": "/nonexistent.pem"})
    with pytest.raises(InvalidArgument, match="ca_file"):
        start_load(spec, results_dir=tmp_path)


def test_a_worker_that_cannot_start_fails_the_start(
    load_token: Callable[[], str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    spec = spec_from_arguments({"urls": ["https://127.0.0.1:9/"], "ca_file": str(bad)})
    token = load_token()
    with pytest.raises(LoadError, match=r"load worker 0 cannot start: SSLError"):
        start_load(spec, results_dir=tmp_path / "r", token=token)
    assert not find_helpers(token)
