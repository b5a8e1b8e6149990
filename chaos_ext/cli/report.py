"""``gameday report``: a shareable HTML report and a Markdown summary from journals."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from chaos_ext._runner.verdict import EXIT_INVALID
from chaos_ext.cli._journals import load_envelopes, load_views

HELP = """\
Turn journals written by `gameday run` (or `chaos run`) into a report:

  OUT/report.html   self-contained (inline CSS and SVG charts, no script, no
                    network): per experiment the verdict, each hypothesis
                    probe's values before/during/after against its tolerance,
                    time-series charts of numeric probe outputs with fault
                    windows shaded, the actions' outputs, rollbacks and the
                    fault ledger; the resilience score on top
  OUT/summary.md    the same tables in Markdown (for a ticket or a PR comment)
  OUT/journals/     the journals, redacted

An envelope (`gameday envelope`'s OUT folder, or its envelope.json) is drawn
first: magnitude on x, the hypothesis probes' values measured during/after
each run's fault on y, the tolerance band, held and deviated markers, the
boundary interval and how many repeats agreed; its files are copied to
OUT/envelopes/.

Secrets are masked: literal values of the experiment's `secrets`, values under
secret-looking keys (password, token, ...), and every --redact VALUE.
The resilience score is the weighted share of steady-state hypotheses that
held (docs/reporting.md).

examples:
  gameday report journal-db-latency.json -o reports/2026-12-01/
  gameday report out/ -o reports/tuesday/ --title "Tuesday game day"
  gameday report out/dns-fragile out/dns-tuned -o reports/envelopes/
  gameday advise --json --namespace shop > risks.json
  gameday report out/ -o reports/tuesday/ --risks risks.json   # with the cluster's risks
"""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "report",
        help="HTML report + Markdown summary from journals",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "journals", nargs="+", metavar="JOURNAL", help="journal files, or folders of them"
    )
    parser.add_argument(
        "-o", "--output", required=True, metavar="DIR", help="folder to write the report to"
    )
    parser.add_argument("--title", default="Game day report", help="the report's title")
    parser.add_argument(
        "--redact",
        action="append",
        default=[],
        metavar="VALUE",
        help="a further value to mask wherever it appears (repeatable)",
    )
    parser.add_argument(
        "--risks",
        metavar="FILE",
        help="the output of `gameday advise --json`: a section listing the cluster's risks",
    )
    parser.set_defaults(handler=handle)


def _advice(path: str | None, console: Console) -> tuple[bool, Any]:
    """(ok, the Advice in ``path`` or None); a file that is not advise's JSON is one line."""
    if path is None:
        return True, None
    from chaos_ext._products.advise.risks import Advice  # noqa: PLC0415 - only with --risks

    try:
        return True, Advice.from_dict(json.loads(Path(path).read_text()))
    except (OSError, ValueError) as exc:
        console.print(f"[red]--risks {escape(path)}: {escape(str(exc))}[/]", highlight=False)
        return False, None


def handle(args: argparse.Namespace, console: Console) -> int:
    from chaos_ext._products.report.render import write_report  # noqa: PLC0415 - matplotlib is heavy

    ok, advice = _advice(args.risks, console)
    envelopes = load_envelopes(args.journals, console) if ok else None
    if envelopes is None:
        return EXIT_INVALID
    views, others = envelopes
    loaded = load_views(others, console, args.redact) if others or not views else []
    if loaded is None:
        return EXIT_INVALID
    journals = [journal for journal, _ in loaded]
    runs = [view for _, view in loaded]
    files = write_report(
        runs, journals, Path(args.output), args.title, views, args.redact, advice=advice
    )
    for view in views:
        console.print(f"envelope {view.label}: {view.summary}", highlight=False, markup=False)
    console.print(f"report: {files.html}", highlight=False, markup=False)
    console.print(f"summary: {files.markdown}", highlight=False, markup=False)
    console.print(f"resilience score: {files.score.text()}", highlight=False)
    return 0
