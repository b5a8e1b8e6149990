"""Pure core of DNS error injection: the arguments, the name patterns, the resolvers.

Names are matched as Chaos Mesh DNSChaos matches them: exact names, ``?``
for one character of a label, ``*`` only at the end for anything;
case-insensitive, a trailing dot ignored. The table that sends the queries
to the proxy is built in :mod:`chaos_ext.dns._dnserr_rules`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaos_ext._core.targets.spec import Target, parse_target
from chaos_ext.errors import InvalidArgument

__all__ = [
    "ERRORS",
    "KIND",
    "Address",
    "ErrorSpec",
    "check_error_arguments",
    "name_regex",
    "parse_resolv_conf",
    "resolv_conf_paths",
]

KIND = "dns-errors"
ERRORS = ("nxdomain", "servfail", "refused", "timeout", "random-ip")
MAX_PATTERNS = 64
MAX_RESOLVERS = 16
MAX_DURATION = 86_400
_PATTERN = re.compile(r"^[a-z0-9_?-]+(\.[a-z0-9_?-]+)*(\.?\*)?$|^\*$")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class ErrorSpec:
    """A validated injection: which names, which error, how often, where."""

    patterns: tuple[str, ...]
    error: str
    percent: int
    port: int
    duration: float
    target: Target
    resolvers: tuple[Address, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "patterns": list(self.patterns),
            "error": self.error,
            "percent": self.percent,
            "port": self.port,
            "duration_seconds": self.duration,
            "resolvers": [str(r) for r in self.resolvers],
        }


def _patterns(value: Any, problems: list[str]) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        problems.append(
            f"patterns: expected a non-empty list of names such as ['a.test', 'api.*'], got"
            f" {value!r}"
        )
        return ()
    if len(value) > MAX_PATTERNS:
        problems.append(f"patterns: {len(value)} patterns, at most {MAX_PATTERNS}")
    found: list[str] = []
    for item in value:
        text = item.lower().rstrip(".") if isinstance(item, str) else ""
        if not text or len(text) > 253 or not _PATTERN.match(text):
            problems.append(
                f"patterns: {item!r} is not a name pattern; use a DNS name where '?' stands"
                " for one character and '*' only at the end for anything (e.g. 'a.*',"
                " 'github.?om')"
            )
            continue
        found.append(text)
    return tuple(dict.fromkeys(found))


def _error(value: Any, problems: list[str]) -> str:
    if value not in ERRORS:
        problems.append(f"error: {value!r} is not a DNS error; use one of {', '.join(ERRORS)}")
        return ""
    return str(value)


def _int(label: str, value: Any, low: int, high: int, problems: list[str]) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        problems.append(f"{label}: {value!r} is not an integer from {low} to {high}")
        return low
    return value


def _duration(value: Any, problems: list[str]) -> float:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not 0 < value <= MAX_DURATION:
        problems.append(
            f"duration_seconds: {value!r} is not a number of seconds from 1 to {MAX_DURATION}"
            " (the fault always ends by itself)"
        )
        return 1.0
    return float(value)


def _target(value: Any, problems: list[str]) -> Target:
    try:
        target = parse_target(value)
    except InvalidArgument as exc:
        problems.append(str(exc))
        return Target("local")
    return target


def _resolvers(value: Any, problems: list[str]) -> tuple[Address, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_RESOLVERS:
        problems.append(
            f"resolvers: expected a list of at most {MAX_RESOLVERS} IP addresses, got {value!r}"
        )
        return ()
    found: list[Address] = []
    for item in value:
        try:
            found.append(ipaddress.ip_address(item))
        except (TypeError, ValueError):
            problems.append(
                f"resolvers: {item!r} is not an IP address; give the resolver's address as"
                " the target's resolv.conf names it (e.g. 10.96.0.10)"
            )
    return tuple(dict.fromkeys(found))


def check_error_arguments(arguments: Mapping[str, Any]) -> ErrorSpec:
    """Validate every inject_dns_errors argument; one InvalidArgument lists every problem."""
    problems: list[str] = []
    spec = ErrorSpec(
        patterns=_patterns(arguments.get("patterns"), problems),
        error=_error(arguments.get("error"), problems),
        percent=_int("percent", arguments.get("percent", 100), 1, 100, problems),
        port=_int("port", arguments.get("port", 53), 1, 65_535, problems),
        duration=_duration(arguments.get("duration_seconds", 60), problems),
        target=_target(arguments.get("target", "local"), problems),
        resolvers=_resolvers(arguments.get("resolvers"), problems),
    )
    if problems:
        raise InvalidArgument("; ".join(problems))
    return spec


def name_regex(patterns: Sequence[str]) -> str:
    """One regular expression (for ``re.fullmatch`` on a lower-case name without its
    trailing dot) that matches any of ``patterns``."""
    parts = []
    for pattern in patterns:
        star = pattern.endswith("*")
        body = re.escape(pattern[:-1] if star else pattern).replace(r"\?", "[^.]")
        parts.append(body.replace("?", "[^.]") + (".*" if star else ""))
    return "|".join(f"(?:{p})" for p in parts)


def resolv_conf_paths(target: Target) -> list[str]:
    """Where the target's resolver configuration is, most specific first (as ``ip netns
    exec`` does: ``/etc/netns/NAME/resolv.conf`` over ``/etc/resolv.conf``)."""
    if target.kind == "netns":
        return [f"/etc/netns/{target.name}/resolv.conf", "/etc/resolv.conf"]
    if target.kind == "pid":
        return [f"/proc/{target.pid}/root/etc/resolv.conf"]
    return ["/etc/resolv.conf"]


def parse_resolv_conf(text: str) -> tuple[Address, ...]:
    """The ``nameserver`` addresses of a resolv.conf (a zone index dropped, junk skipped)."""
    found: list[Address] = []
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver":
            try:
                found.append(ipaddress.ip_address(words[1].split("%", 1)[0]))
            except ValueError:
                continue
    return tuple(dict.fromkeys(found))
