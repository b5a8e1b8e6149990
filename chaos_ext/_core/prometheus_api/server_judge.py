"""PromQL judged by the Prometheus that will run it: its ``/api/v1/format_query``.

``format_query`` (Prometheus 2.38 and later, Debian's 2.42 included) parses a
query with the server's own parser, version and feature flags, and answers 400
with the parse error (``1:14: parse error: unexpected identifier "up" in
aggregation``) or 200. ``/api/v1/parse_query`` (newer servers) is asked when
``format_query`` is not there. A server that does not answer, or has neither,
gives no verdict: the offline check decides (:mod:`chaos_ext._core.prometheus_api.promql`),
for the server's version when its ``/api/v1/status/buildinfo`` answered (a server older
than 2.38 has buildinfo but neither endpoint).
"""

from __future__ import annotations

import logging
import re
from typing import Any, NamedTuple

import requests

from chaos_ext._core.prometheus_api.promql import Judge, Verdict

__all__ = ["ServerJudge", "server_judge"]

logger = logging.getLogger(__name__)
_ENDPOINTS = ("/api/v1/format_query", "/api/v1/parse_query")
_POSITION = re.compile(r"^(\d+):(\d+): ")
_PREFIX = 'invalid parameter "query": '


def _reason(error: str) -> tuple[str, str]:
    """``1:14: parse error: ...`` -> ``("at char 14", "...")``."""
    text = error.removeprefix(_PREFIX)
    match = _POSITION.match(text)
    if not match:
        return "", text.removeprefix("parse error: ")
    line, char = match.groups()
    at = f"at char {char}" if line == "1" else f"at line {line}, char {char}"
    return at, text[match.end() :].removeprefix("parse error: ")


class _ServerJudge:
    def __init__(self, url: str, timeout: float) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.verdicts: dict[str, Verdict] = {}
        self.endpoints = list(_ENDPOINTS)
        self.silent = False  # the server did not answer: say it once, then judge offline

    def version(self) -> str | None:
        try:
            answer = requests.get(
                f"{self.url}/api/v1/status/buildinfo", timeout=self.timeout
            ).json()
        except (requests.RequestException, ValueError):
            return None
        version = (answer.get("data") or {}).get("version") if isinstance(answer, dict) else None
        return str(version) if version else None

    def __call__(self, expr: str) -> Verdict:
        if expr not in self.verdicts:
            self.verdicts[expr] = self._ask(expr)
        return self.verdicts[expr]

    def _ask(self, expr: str) -> Verdict:
        while self.endpoints and not self.silent:
            try:
                response = requests.post(
                    f"{self.url}{self.endpoints[0]}", data={"query": expr}, timeout=self.timeout
                )
            except requests.RequestException as exc:
                self._give_up(f"did not answer ({type(exc).__name__})")
                return None
            if response.status_code == 404:
                self.endpoints.pop(0)  # an older server: try the next endpoint
                continue
            return self._verdict(response)
        if not self.endpoints and not self.silent:
            self._give_up("has neither /api/v1/format_query nor /api/v1/parse_query")
        return None

    def _verdict(self, response: requests.Response) -> Verdict:
        try:
            body: Any = response.json()
        except ValueError:
            body = {}
        if response.status_code == 200:
            return True
        if response.status_code == 400 and body.get("errorType") == "bad_data":
            return _reason(str(body.get("error", "")))
        self._give_up(f"answered HTTP {response.status_code}")
        return None

    def _give_up(self, why: str) -> None:
        if not self.silent:
            logger.warning("Prometheus at %s %s: PromQL judged offline instead", self.url, why)
        self.silent = True


class ServerJudge(NamedTuple):
    """A server's judge: ``(name, judge)`` is for
    :func:`~chaos_ext._core.prometheus_api.promql.validating`; ``version`` is its
    buildinfo's (``2.42.0+ds``), None when it did not answer."""

    name: str
    judge: Judge
    version: str | None


def server_judge(url: str, *, timeout: float = 5.0) -> ServerJudge:
    """The judge of the server at ``url``: the name says which server judged
    (``Prometheus 2.42.0 at http://127.0.0.1:9090``)."""
    judge = _ServerJudge(url, timeout)
    version = judge.version()
    name = f"Prometheus {version} at {judge.url}" if version else f"Prometheus at {judge.url}"
    return ServerJudge(name, judge, version)
