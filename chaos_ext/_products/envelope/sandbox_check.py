"""Does the fragile app's DNS envelope break at dnsmasq's own limit? (``scripts/demo.sh envelope``)

``python -m chaos_ext._products.envelope.sandbox_check OUT``, OUT being the folder
``gameday sandbox envelope`` wrote for experiments/sandbox/envelope/dns-tcp-connections.json
on the fragile app. dnsmasq serves TCP with 20 child processes (its
``MAX_PROCS``), so the fragile app, which resolves over TCP on every request,
should break at 20 held connections; 20 ± 2 allows for the app's own lookups
in flight. The conclusion is recomputed from the runs. Exit 0 when it does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from chaos_ext._products.envelope.document import observations_of, search_of
from chaos_ext._products.envelope.search import conclude, describe

__all__ = ["DNSMASQ_TCP_CHILDREN", "TOLERANCE", "main"]

DNSMASQ_TCP_CHILDREN = 20
TOLERANCE = 2


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m chaos_ext._products.envelope.sandbox_check OUT", file=sys.stderr)  # noqa: T201
        return 3
    doc = json.loads((Path(argv[0]) / "envelope.json").read_text())
    search = search_of(doc["settings"])
    envelope = conclude(search, observations_of(doc["runs"]))
    broke = envelope.deviated
    ok = (
        envelope.kind in ("boundary", "noisy")
        and broke is not None
        and abs(broke - DNSMASQ_TCP_CHILDREN) <= TOLERANCE
    )
    text = describe(envelope, search.space, str(doc["settings"].get("unit", "")))
    verdict = "yes" if ok else "NO"
    print(  # noqa: T201 - the demo's output
        f"fragile app's DNS envelope at dnsmasq's {DNSMASQ_TCP_CHILDREN} TCP children "
        f"(± {TOLERANCE}): {verdict} ({text})"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
