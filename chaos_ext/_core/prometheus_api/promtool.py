"""Prometheus' own parser offline: ``promtool check rules`` (Debian's ``prometheus`` package).

Used when it is installed: to check rule files (expressions and annotation
templates, as Prometheus loads them) and to say where a query the offline
parser refused without a position goes wrong. Every call has a timeout.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import yaml

__all__ = ["promtool", "rule_file_problems", "syntax_error"]

_TIMEOUT_SECONDS = 30.0
_PARSE_ERROR = re.compile(r"could not parse expression: (\d+):(\d+): (parse error: .*)$")


def promtool() -> str | None:
    """The ``promtool`` on PATH, or None."""
    return shutil.which("promtool")


def rule_file_problems(path: Path) -> list[str] | None:
    """promtool's complaints about a rule file ([] when it passes); None without promtool."""
    binary = promtool()
    if binary is None:
        return None
    try:
        done = subprocess.run(
            [binary, "check", "rules", str(path)],
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [f"promtool check rules did not finish: {exc}"]
    if done.returncode == 0:
        return []
    lines = [line.strip() for line in (done.stdout + done.stderr).splitlines()]
    found = [line for line in lines if line and line not in ("FAILED:", f"Checking {path}")]
    return found or [f"promtool check rules exited {done.returncode}"]


def syntax_error(expr: str) -> tuple[str, str] | None:
    """Where and why Prometheus' parser refuses ``expr``: ``("at char 14", 'unexpected
    identifier "up" in aggregation')``; None when promtool accepts it, is missing, or
    says something else."""
    with tempfile.TemporaryDirectory(prefix="gameday-promql-") as folder:
        path = Path(folder) / "query.yml"
        rule = {"record": "gameday:query", "expr": expr}
        path.write_text(yaml.safe_dump({"groups": [{"name": "q", "rules": [rule]}]}))
        problems = rule_file_problems(path)
    for problem in problems or ():
        match = _PARSE_ERROR.search(problem)
        if match:
            line, char, message = match.groups()
            at = f"at char {char}" if line == "1" else f"at line {line}, char {char}"
            return at, message.removeprefix("parse error: ")
    return None
