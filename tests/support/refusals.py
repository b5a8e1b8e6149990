"""Run activities the way ``chaos run`` does and record what they touched (child process).

``python -m support.refusals < cases.json`` reads ``[{"module", "func", "arguments"}]``
plus a ``configuration``, installs a CPython audit hook (PEP 578) that records every
network and process event (``socket.connect``, ``socket.getaddrinfo``,
``subprocess.Popen`` ...), runs each activity through chaoslib's own
``run_python_activity`` and prints, per case, the error chaoslib reports and the
events seen while it ran. Audit hooks cannot be removed, hence a child process.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

WATCHED = (
    "socket.connect",
    "socket.sendto",
    "socket.sendmsg",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.fork",
    "os.spawn",
    "pty.spawn",
)
_events: list[str] = []


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event in WATCHED:
        _events.append(f"{event} {args!r:.120}")


def main() -> None:
    request = json.load(sys.stdin)
    from chaoslib.exceptions import ActivityFailed  # noqa: PLC0415 - after reading the cases
    from chaoslib.provider.python import run_python_activity  # noqa: PLC0415

    for case in request["cases"]:
        importlib.import_module(case["module"])  # imports are not what is watched
    sys.addaudithook(_hook)
    results = []
    for case in request["cases"]:
        activity = {
            "type": "probe",
            "name": case["func"],
            "provider": {
                "type": "python",
                "module": case["module"],
                "func": case["func"],
                "arguments": case["arguments"],
            },
        }
        _events.clear()
        error = ""
        try:
            configuration = case.get("configuration", request["configuration"])
            run_python_activity(activity, dict(configuration), {})
        except ActivityFailed as exc:
            error = str(exc)
        results.append({"func": case["func"], "error": error, "events": list(_events)})
    sys.stdout.write(json.dumps(results) + "\n")


if __name__ == "__main__":
    main()
