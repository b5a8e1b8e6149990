"""What a load is: targets, rate profile and caps (pure, validated, JSON round-trip).

A rate profile is a list of :class:`Segment` (a duration with a rate that goes
linearly from ``start_rate`` to ``end_rate``): a constant rate is one segment,
a ramp is one rising segment (plus a hold), steps are several flat segments.

Safety: a load is refused when its peak rate is above
:data:`SAFE_RATE` req/s or it lasts longer than :data:`SAFE_DURATION` s,
unless the caller gives explicit caps (``max_rate``, ``max_duration_seconds``) that
cover it. No cap can go above the absolute ceilings.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

from chaos_ext._core.validation import require_range
from chaos_ext.errors import InvalidArgument

__all__ = [
    "ABSOLUTE_MAX_DURATION",
    "ABSOLUTE_MAX_RATE",
    "JOB_KEYS",
    "SAFE_DURATION",
    "SAFE_RATE",
    "SPEC_KEYS",
    "LoadSpec",
    "Segment",
    "check_header_fields",
    "check_load_arguments",
    "spec_from_arguments",
]

SAFE_RATE = 500.0
SAFE_DURATION = 600.0
ABSOLUTE_MAX_RATE = 50_000.0
ABSOLUTE_MAX_DURATION = 3_600.0
DEFAULT_DURATION = 30.0
MAX_CONCURRENCY = 10_000
MAX_TIMEOUT = 120.0
RATE_PER_PROCESS = 3_000.0  # what one worker process sustains comfortably (see benchmarks/load.py)
_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
# RFC 9110 section 5.1: a field name is a token; section 5.5: a field value has no
# CR, LF or NUL (nor other controls but HTAB). A CR/LF would end the header
# line and smuggle a second header (or a second request) onto the wire.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE_CHAR = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_BAD_URL_CHAR = re.compile(r"[\x00-\x20\x7f]")


@dataclass(frozen=True)
class Segment:
    """``duration`` seconds with a rate going linearly from ``start_rate`` to ``end_rate``."""

    duration: float
    start_rate: float
    end_rate: float

    @property
    def requests(self) -> float:
        return self.duration * (self.start_rate + self.end_rate) / 2


@dataclass(frozen=True)
class LoadSpec:
    """A validated load. ``headers`` and ``body`` never go to logs or results."""

    urls: tuple[str, ...]
    segments: tuple[Segment, ...]
    concurrency_limit: int = 64
    method: str = "GET"
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    body: str = field(default="", repr=False)
    http2: bool = False
    timeout: float = 5.0
    processes: int = 1
    bucket_seconds: float = 1.0
    metrics_port: int = 0
    metrics_addr: str = "127.0.0.1"
    name: str = ""
    ca_file: str = ""
    #: this load is shard ``shard_index`` of ``shard_count`` (a pod of a Job): arrivals
    #: ``shard_index, shard_index + shard_count, ...`` of the one schedule
    shard_index: int = 0
    shard_count: int = 1
    #: the common start (unix time) of every shard; 0: as soon as the workers are ready
    start_at: float = 0.0
    #: a response header naming why a request failed (e.g. ``X-Error-Cause``): each
    #: 5xx response's value is counted under ``causes``; "" reads no header
    cause_header: str = ""

    @property
    def duration(self) -> float:
        return sum(s.duration for s in self.segments)

    @property
    def peak_rate(self) -> float:
        return max(max(s.start_rate, s.end_rate) for s in self.segments)

    @property
    def total_requests(self) -> int:
        return math.ceil(sum(s.requests for s in self.segments))

    def to_payload(self) -> dict[str, Any]:
        """JSON for the helper process (headers and body included: stdin only)."""
        data = asdict(self)
        data["headers"] = dict(self.headers)
        return data

    def public(self) -> dict[str, Any]:
        """What may be shown in journals and results: no headers, no body."""
        data = self.to_payload()
        data["headers"] = sorted(self.headers)
        data["body"] = f"<{len(self.body)} bytes>"
        return data

    @classmethod
    def from_payload(cls, data: Mapping[str, Any]) -> LoadSpec:
        fields = dict(data)
        fields["urls"] = tuple(fields["urls"])
        fields["segments"] = tuple(Segment(**s) for s in fields["segments"])
        return cls(**fields)


def _urls(value: Any) -> tuple[str, ...]:
    urls = [value] if isinstance(value, str) else value
    if not isinstance(urls, list | tuple) or not urls or len(urls) > 100:
        raise InvalidArgument(f"urls: expected 1 to 100 URLs, got {value!r}")
    for url in urls:
        if isinstance(url, str) and _BAD_URL_CHAR.search(url):
            raise InvalidArgument(
                f"urls: {url!r} contains a space or control character (CR, LF, tab...):"
                " percent-encode it (%20, %0D, %0A)"
            )
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidArgument(f"urls: {url!r} is not an http:// or https:// URL with a host")
        if parts.username or parts.password:
            raise InvalidArgument(
                f"urls: {parts.hostname}: credentials in the URL are refused; "
                "pass an Authorization header from the experiment's secrets"
            )
    return tuple(urls)


def check_header_fields(headers: Any) -> dict[str, str]:
    """The headers as a plain dict, or InvalidArgument naming the bad one.

    Refuses names that are not RFC 9110 tokens (a space, colon, CR or LF in
    the name) and values with CR, LF, NUL or another control character: the
    HTTP/1 client writes headers as lines, so a CR/LF would inject another
    header. Values are not quoted in the message (they may be secrets).
    """
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise InvalidArgument("headers: expected a mapping of strings to strings")
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name):
            raise InvalidArgument(
                f"headers: the name {name!r} is not a valid header name (letters, digits"
                " and !#$%&'*+-.^_`|~ only; no space, colon, CR or LF)"
            )
        bad = _BAD_VALUE_CHAR.search(value)
        if bad:
            raise InvalidArgument(
                f"headers: the value of {name!r} contains the control character"
                f" {bad.group()!r} at position {bad.start()}: CR/LF would inject"
                " another header; remove it"
            )
    return dict(headers)


def _ramp(ramp: Mapping[str, Any], duration: float) -> list[Segment]:
    missing = {"from", "to", "over_seconds"} - set(ramp)
    if missing:
        raise InvalidArgument(
            f"ramp: missing {sorted(missing)}; e.g. {{'from': 10, 'to': 200, 'over_seconds': 60}}"
        )
    start = require_range("ramp.from", ramp["from"], 0, ABSOLUTE_MAX_RATE)
    end = require_range("ramp.to", ramp["to"], 0, ABSOLUTE_MAX_RATE)
    over = require_range("ramp.over_seconds", ramp["over_seconds"], 0.001, ABSOLUTE_MAX_DURATION)
    if duration and duration < over:
        raise InvalidArgument(
            f"duration_seconds: {duration:g} is shorter than the ramp ({over:g} s)"
        )
    segments = [Segment(float(over), float(start), float(end))]
    if duration > over:
        segments.append(Segment(float(duration - over), float(end), float(end)))
    return segments


def _steps(steps: list[Any], duration: float) -> list[Segment]:
    segments = []
    for i, step in enumerate(steps):
        if not isinstance(step, Mapping) or set(step) != {"rate", "for_seconds"}:
            raise InvalidArgument(
                f"steps[{i}]: expected {{'rate': req/s, 'for_seconds': seconds}}, got {step!r}"
            )
        rate = require_range(f"steps[{i}].rate", step["rate"], 0, ABSOLUTE_MAX_RATE)
        span = require_range(
            f"steps[{i}].for_seconds", step["for_seconds"], 0.001, ABSOLUTE_MAX_DURATION
        )
        segments.append(Segment(float(span), float(rate), float(rate)))
    total = sum(s.duration for s in segments)
    if duration and abs(duration - total) > 1e-6:
        raise InvalidArgument(
            f"duration_seconds: {duration:g} differs from the steps' total ({total:g} s); "
            "leave duration_seconds at 0 with steps"
        )
    return segments


def _segments(arguments: Mapping[str, Any]) -> list[Segment]:
    duration = require_range(
        "duration_seconds", arguments.get("duration_seconds", 0.0), 0, ABSOLUTE_MAX_DURATION
    )
    ramp, steps = arguments.get("ramp"), arguments.get("steps")
    if ramp is not None and steps is not None:
        raise InvalidArgument("ramp and steps: give one profile, not both")
    if ramp is not None:
        if not isinstance(ramp, Mapping):
            raise InvalidArgument(f"ramp: expected a mapping, got {ramp!r}")
        return _ramp(ramp, duration)
    if steps is not None:
        if not isinstance(steps, list) or not steps:
            raise InvalidArgument(f"steps: expected a non-empty list, got {steps!r}")
        return _steps(steps, duration)
    rate = require_range("rate", arguments.get("rate", 10.0), 0.001, ABSOLUTE_MAX_RATE)
    return [Segment(float(duration or DEFAULT_DURATION), float(rate), float(rate))]


def _check_caps(segments: list[Segment], arguments: Mapping[str, Any]) -> None:
    peak = max(max(s.start_rate, s.end_rate) for s in segments)
    total = sum(s.duration for s in segments)
    max_rate = require_range("max_rate", arguments.get("max_rate", 0.0), 0, ABSOLUTE_MAX_RATE)
    max_duration = require_range(
        "max_duration_seconds", arguments.get("max_duration_seconds", 0.0), 0, ABSOLUTE_MAX_DURATION
    )
    rate_cap = max_rate or SAFE_RATE
    if peak > rate_cap:
        hint = "" if max_rate else f"; above {SAFE_RATE:g} req/s set max_rate explicitly"
        raise InvalidArgument(f"rate: peak {peak:g} req/s is above the cap {rate_cap:g}{hint}")
    duration_cap = max_duration or SAFE_DURATION
    if total > duration_cap:
        hint = (
            ""
            if max_duration
            else f"; above {SAFE_DURATION:g} s set max_duration_seconds explicitly"
        )
        raise InvalidArgument(
            f"duration_seconds: {total:g} is above the cap {duration_cap:g} s{hint}"
        )
    if peak <= 0:
        raise InvalidArgument("rate: the profile never sends anything (peak rate 0)")


def _address(value: Any) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except (TypeError, ValueError):
        raise InvalidArgument(f"metrics_addr: {value!r} is not an IP address") from None


def _processes(requested: Any, peak: float, concurrency: int) -> int:
    cpus = os.cpu_count() or 1
    if requested:
        return int(require_range("processes", requested, 1, max(cpus, 1) * 2))
    return max(1, min(cpus, concurrency, math.ceil(peak / RATE_PER_PROCESS)))


#: The arguments a load profile is built from (drive_http_load adds its Job ones).
SPEC_KEYS = frozenset(
    {
        "urls",
        "rate",
        "duration_seconds",
        "ramp",
        "steps",
        "concurrency_limit",
        "method",
        "headers",
        "body",
        "http2",
        "timeout_seconds",
        "max_rate",
        "max_duration_seconds",
        "processes",
        "metrics_port",
        "metrics_addr",
        "name",
        "ca_file",
        "bucket_seconds",
        "cause_header",
    }
)
#: drive_http_load's own arguments that are not part of the profile.
JOB_KEYS = frozenset({"wait", "replicas", "kubernetes"})


def spec_from_arguments(arguments: Mapping[str, Any], other_keys: Collection[str] = ()) -> LoadSpec:
    """Build a :class:`LoadSpec` from drive_http_load's arguments; raise InvalidArgument.

    A key that is neither a profile argument nor one of ``other_keys`` (the
    caller's own) is refused: an old or misspelt name (``duration`` for
    ``duration_seconds``) would otherwise fall back to a default silently.
    """
    unknown = sorted(set(arguments) - SPEC_KEYS - set(other_keys))
    if unknown:
        raise InvalidArgument(
            f"unknown load argument(s) {', '.join(unknown)}; known: {', '.join(sorted(SPEC_KEYS))}"
        )
    urls = _urls(arguments.get("urls"))
    segments = _segments(arguments)
    _check_caps(segments, arguments)
    method = str(arguments.get("method", "GET")).upper()
    if method not in _METHODS:
        raise InvalidArgument(f"method: {method!r} is not one of {sorted(_METHODS)}")
    headers = check_header_fields(arguments.get("headers") or {})
    concurrency = int(
        require_range(
            "concurrency_limit", arguments.get("concurrency_limit", 64), 1, MAX_CONCURRENCY
        )
    )
    peak = max(max(s.start_rate, s.end_rate) for s in segments)
    bucket = require_range("bucket_seconds", arguments.get("bucket_seconds", 1.0), 0.1, 60)
    cause_header = str(arguments.get("cause_header") or "")
    if cause_header and not _TOKEN.fullmatch(cause_header):
        raise InvalidArgument(
            f"cause_header: {cause_header!r} is not a header name (letters, digits and"
            " !#$%&'*+-.^_`|~ only), e.g. 'X-Error-Cause'"
        )
    return LoadSpec(
        urls=urls,
        segments=tuple(segments),
        concurrency_limit=concurrency,
        method=method,
        headers=headers,
        body=str(arguments.get("body") or ""),
        http2=bool(arguments.get("http2", False)),
        timeout=float(
            require_range(
                "timeout_seconds", arguments.get("timeout_seconds", 5.0), 0.001, MAX_TIMEOUT
            )
        ),
        processes=_processes(arguments.get("processes", 0), peak, concurrency),
        bucket_seconds=float(bucket),
        metrics_port=int(
            require_range("metrics_port", arguments.get("metrics_port", 0), -1, 65535)
        ),
        metrics_addr=_address(arguments.get("metrics_addr", "127.0.0.1")),
        name=str(arguments.get("name") or ""),
        ca_file=str(arguments.get("ca_file") or ""),
        cause_header=cause_header,
    )


def check_load_arguments(arguments: Mapping[str, Any]) -> None:
    """The semantic check ``gameday validate`` runs for drive_http_load."""
    spec_from_arguments(arguments, other_keys=JOB_KEYS)
