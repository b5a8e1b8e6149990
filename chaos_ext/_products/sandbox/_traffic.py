"""Background traffic for the sandbox: the load driver, bounded, from the monitoring host.

Run inside the monitoring namespace (``ip netns exec <prefix>-mon python -m
chaos_ext._products.sandbox._traffic ...``): it starts an open-loop load with
:mod:`chaos_ext.load.driver` tagged with the sandbox's token (so ``sandbox
down`` stops it) and exits; the load itself stops at its duration cap.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from chaos_ext.errors import ChaosExtError
from chaos_ext.load.driver import start_load
from chaos_ext.load.spec import spec_from_arguments

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="sandbox-traffic", description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--duration", type=float, default=3600.0)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--token", required=True)
    args = parser.parse_args(argv)
    spec = spec_from_arguments(
        {
            "urls": [args.url],
            "rate": args.rate,
            "duration_seconds": args.duration,
            "max_duration_seconds": args.duration,
            "concurrency_limit": 64,
            "timeout_seconds": 5.0,
            "name": "sandbox-traffic",
        }
    )
    try:
        load = start_load(spec, results_dir=args.results, token=args.token, ready_timeout=30)
    except ChaosExtError as exc:
        sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        raise SystemExit(1) from None
    sys.stdout.write(json.dumps(load.as_dict()) + "\n")


if __name__ == "__main__":
    main()
