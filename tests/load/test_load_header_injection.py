"""Header injection: CR/LF in a load's header names or values is refused, never sent.

The cases are CPython's own header-injection vectors (bpo-22928), copied from
``HeaderTests.test_invalid_headers`` in ``Lib/test/test_httplib.py`` of
https://github.com/python/cpython at commit
73113f304cc05d1f7be02cdc59335464a162da92 (PSF License Version 2). They are
refused at ``gameday validate`` time (exit 3, nothing runs), when the
activity runs (InvalidArgument, no ledger entry, no helper process) and by
the HTTP/1 client itself when it builds a request.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chaos_ext._core.helper import find_helpers
from chaos_ext._core.ledger import Ledger
from chaos_ext.errors import InvalidArgument
from chaos_ext.load._http1 import build_request
from chaos_ext.load.actions import drive_http_load
from chaos_ext.load.spec import spec_from_arguments

# (name, value) pairs from CPython's test_invalid_headers, bytes decoded as latin-1.
CPYTHON_INVALID_HEADERS = [
    (b"Invalid\r\nName", b"ValidValue"),
    (b"Invalid\rName", b"ValidValue"),
    (b"Invalid\nName", b"ValidValue"),
    (b"\r\nInvalidName", b"ValidValue"),
    (b"\rInvalidName", b"ValidValue"),
    (b"\nInvalidName", b"ValidValue"),
    (b" InvalidName", b"ValidValue"),
    (b"\tInvalidName", b"ValidValue"),
    (b"Invalid:Name", b"ValidValue"),
    (b":InvalidName", b"ValidValue"),
    (b"ValidName", b"Invalid\r\nValue"),
    (b"ValidName", b"Invalid\rValue"),
    (b"ValidName", b"Invalid\nValue"),
    (b"ValidName", b"InvalidValue\r\n"),
    (b"ValidName", b"InvalidValue\r"),
    (b"ValidName", b"InvalidValue\n"),
]
CASES = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in CPYTHON_INVALID_HEADERS]
# The issue's own example: one header that would go out as two.
CASES.append(("X-A", "v\r\nInjected: 1"))
IDS = [repr(f"{n}: {v}") for n, v in CASES]


@pytest.mark.parametrize(("name", "value"), CASES, ids=IDS)
def test_the_spec_refuses_each_vector(name: str, value: str) -> None:
    with pytest.raises(InvalidArgument, match=r"^headers: the (name|value)"):
        spec_from_arguments({"urls": "http://127.0.0.1:9/", "headers": {name: value}})


@pytest.mark.parametrize(("name", "value"), CASES, ids=IDS)
def test_the_http1_client_refuses_each_vector(name: str, value: str) -> None:
    with pytest.raises(InvalidArgument, match=r"^headers: "):
        build_request("GET", "http://127.0.0.1:9/", {name: value}, "")


def test_the_refusal_never_quotes_the_value() -> None:
    """A header value may be a secret: the message names the header and the character."""
    with pytest.raises(InvalidArgument) as refused:
        spec_from_arguments(
            {"urls": "http://127.0.0.1:9/", "headers": {"Authorization": "Bearer s3cr3t\r\nX: 1"}}
        )
    assert "s3cr3t" not in str(refused.value)
    assert "'Authorization'" in str(refused.value) and r"'\r'" in str(refused.value)


def test_legal_headers_pass_unchanged() -> None:
    """RFC 9110 allows HTAB and visible latin-1 in values; tokens with ! # ~ in names."""
    headers = {"X-Trace!#~": "a\tb ", "Accept": "text/html, */*;q=0.8", "X-Latin": "caf\xe9"}
    spec = spec_from_arguments({"urls": "http://127.0.0.1:9/", "headers": headers})
    assert dict(spec.headers) == headers
    wire = build_request("GET", "http://127.0.0.1:9/", headers, "")
    assert wire.count(b"\r\n") == 3 + len(headers) + 1  # request line, Host, UA, headers, blank


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9/a\r\nX-Injected: 1", "http://127.0.0.1:9/a b", "http://h/\t"]
)
def test_urls_with_control_characters_are_refused(url: str) -> None:
    """urllib silently strips CR/LF/tab from URLs; we refuse rather than send another URL."""
    with pytest.raises(InvalidArgument, match=r"urls: .*control character"):
        spec_from_arguments({"urls": url})


def test_run_time_refusal_injects_nothing(ledger_path: Path) -> None:
    """The activity refuses before the ledger or any process is touched; the server sees nothing."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.5)
    seen: list[bytes] = []

    def accept() -> None:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            return
        with conn:
            seen.append(conn.recv(4096))

    thread = threading.Thread(target=accept)
    thread.start()
    url = f"http://127.0.0.1:{server.getsockname()[1]}/"
    try:
        with pytest.raises(InvalidArgument, match="headers: the value of 'X-A'"):
            drive_http_load(urls=url, rate=5, headers={"X-A": "v\r\nInjected: 1"}, name="inj")
    finally:
        thread.join()
        server.close()
    assert seen == []
    assert not ledger_path.exists() or Ledger(ledger_path).open_entries() == []
    assert not find_helpers("inj")


def test_gameday_validate_refuses_it(
    gameday: Callable[..., subprocess.CompletedProcess[str]],
    write_experiment: Callable[[dict[str, Any], str], Path],
    ledger_path: Path,
) -> None:
    activity = {
        "type": "action",
        "name": "load",
        "provider": {
            "type": "python",
            "module": "chaos_ext.load.actions",
            "func": "drive_http_load",
            "arguments": {"urls": "http://127.0.0.1:9/", "headers": {"X-A": "v\r\nInjected: 1"}},
        },
    }
    path = write_experiment({"title": "t", "description": "d", "method": [activity]}, "inj.json")
    result = gameday("validate", str(path))
    assert result.returncode == 3, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert "headers: the value of 'X-A'" in output
    assert not ledger_path.exists() or Ledger(ledger_path).open_entries() == []
    assert json.loads(path.read_text())["method"][0]["name"] == "load"
