"""``gameday catalog``: the named Prometheus probes and built-in abort plans."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chaos_ext._core.console import make_console
from chaos_ext._runner.execute import EXIT_HELD, EXIT_INVALID
from chaos_ext.errors import InvalidArgument
from chaos_ext.prometheus.catalogs import (
    CATALOG_ENV,
    CatalogProbe,
    builtin_abort_plans,
    default_catalog,
)

HELP = f"""\
List the probe catalog: the named steady-state probes that catalog_probe,
catalog_check and abort plans refer to (built in, plus the files and folders
in {CATALOG_ENV}), and the built-in abort plans that `gameday run --abort-on
NAME` accepts. With a NAME, show that probe's PromQL, parameters and tolerance.

examples:
  gameday catalog
  gameday catalog http-error-ratio
  gameday catalog --json
"""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "catalog",
        help="list the named Prometheus probes and abort plans",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", nargs="?", metavar="NAME", help="show one probe in full")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=handle)


def _as_dict(probe: CatalogProbe) -> dict[str, Any]:
    return {
        "name": probe.name,
        "description": probe.description,
        "watches": probe.watches,
        "promql": probe.promql.strip(),
        "steady": probe.tolerance.describe(),
        "unit": probe.unit,
        "parameters": {
            n: {"kind": p.kind, "default": p.default, "description": p.description}
            for n, p in probe.parameters.items()
        },
        "if_empty": probe.if_empty,
        "if_nan": probe.if_nan,
        "source": probe.source,
    }


def handle(args: argparse.Namespace, console: Console) -> int:
    try:
        catalog = default_catalog()
        names = [args.name] if args.name else catalog.names()
        probes = [catalog.get(n) for n in names]
    except InvalidArgument as exc:
        console.print(f"[red]{escape(str(exc))}[/]", highlight=False)
        return EXIT_INVALID
    plans = {name: str(path) for name, path in sorted(builtin_abort_plans().items())}
    if args.json:
        document = {"probes": [_as_dict(p) for p in probes], "abort_plans": plans}
        print(json.dumps(document, indent=2))  # noqa: T201 - stdout is the output
        return EXIT_HELD
    out = make_console(no_color=args.no_color)
    if args.name:
        out.print_json(json.dumps(_as_dict(probes[0])))
        return EXIT_HELD
    table = Table(title=f"probe catalog ({len(probes)} probes)")
    table.add_column("name", no_wrap=True)
    table.add_column("steady", no_wrap=True)
    table.add_column("unit", no_wrap=True)
    table.add_column("description", overflow="fold", min_width=30)
    for probe in probes:
        table.add_row(probe.name, probe.tolerance.describe(), probe.unit, probe.description)
    out.print(table)
    out.print("built-in abort plans (gameday run --abort-on NAME): " + ", ".join(plans))
    return EXIT_HELD
