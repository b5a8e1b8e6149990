"""``gameday advise --journal J [J ...]``: the findings of runs, as the report shows them.

For each journal whose hypothesis deviated: the cause the evidence supports, the one fix
and the experiment that proves it, or "cause unknown" and what to measure next
(``chaos_ext._products.findings``; the rules are in ``probes/findings/`` and
``$GAMEDAY_FINDINGS``). Read-only: it reads the journals and the rules, nothing else.

``add_journal_options(parser)`` and ``handle_journals(args, console)`` are the journal
half of ``gameday advise`` (``chaos_ext/cli/advise.py`` registers the command).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chaos_ext._core.console import make_console
from chaos_ext._products.findings import Finding, findings_of_journals, load_rules
from chaos_ext._products.report.findings import findings_summary
from chaos_ext._products.report.journals import load_journal
from chaos_ext._runner.verdict import EXIT_HELD, EXIT_INVALID
from chaos_ext.cli._journals import expand_journal_paths
from chaos_ext.errors import FindingRulesError, JournalError

__all__ = ["add_journal_options", "findings_of_paths", "handle_journals", "show_findings"]


def add_journal_options(parser: argparse.ArgumentParser) -> None:
    """``--journal J [J ...]`` (files, or folders of journals) and ``--json``."""
    parser.add_argument(
        "--journal",
        nargs="+",
        action="extend",
        metavar="J",
        default=[],
        help="journals, or folders of them (a report folder: its run/ or journals/): their "
        "findings, and the DB ceiling exhaust_connections measured (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def findings_of_paths(paths: Sequence[Path]) -> list[Finding]:
    """The findings of the journals at ``paths`` (JournalError, FindingRulesError on bad input)."""
    journals = [(str(path), load_journal(path)) for path in paths]
    return findings_of_journals(journals, load_rules())


def _table(findings: list[Finding]) -> Table:
    table = Table(title=findings_summary(findings))
    table.add_column("experiment", overflow="fold")
    table.add_column("cause", overflow="fold")
    table.add_column("fix (setting), or what to measure next", overflow="fold")
    for f in findings:
        nxt = f.fix.setting if f.fix else f"measure next: {f.measure_next}"
        table.add_row(escape(f.experiment), escape(f.title), escape(nxt))
    return table


def _details(f: Finding) -> list[str]:
    """One finding in full: cause, evidence, fix, proof (or what to measure next)."""
    lines = [f"[bold]{escape(f.experiment)}[/] ({escape(f.source)})", f"  cause: {escape(f.cause)}"]
    lines += [f"  - {escape(e)}" for e in f.evidence]
    if f.fix:
        lines.append(f"  fix: {escape(f.fix.setting)}: {escape(f.fix.change)}")
    if f.proof:
        lines += [f"  prove it, {escape(p)}" for p in f.proof.lines()]
    if f.measure_next:
        lines.append(f"  measure next: {escape(f.measure_next)}")
    return lines


def _read(names: list[str], console: Console) -> list[tuple[str, dict[str, Any]]] | None:
    paths = expand_journal_paths(names)
    if not paths:
        console.print("[red]no journal found[/]")
        return None
    journals = []
    for path in paths:
        try:
            journals.append((str(path), load_journal(path)))
        except JournalError as exc:
            console.print(f"[red]invalid journal:[/] {escape(str(exc))}", highlight=False)
            return None
    return journals


def handle_journals(args: argparse.Namespace, console: Console) -> int:
    """Print the findings of ``args.journal`` (a table, or ``--json``); 3 on bad input."""
    if not args.journal:
        console.print("[red]give --journal J [J ...]: the journals to advise on[/]")
        return EXIT_INVALID
    journals = _read(list(args.journal), console)
    if journals is None:
        return EXIT_INVALID
    try:
        findings = findings_of_journals(journals, load_rules())
    except FindingRulesError as exc:
        console.print(f"[red]invalid finding rules:[/] {escape(str(exc))}", highlight=False)
        return EXIT_INVALID
    if args.json:
        print(json.dumps([f.as_dict() for f in findings], indent=2))  # noqa: T201 - the output
        return EXIT_HELD
    show_findings(findings, no_color=getattr(args, "no_color", False))
    return EXIT_HELD


def show_findings(findings: list[Finding], *, no_color: bool = False) -> None:
    """The findings as a table, then each in full (or the one line saying there are none)."""
    out = make_console(no_color=no_color)
    if not findings:
        out.print(findings_summary(findings))
        return
    out.print(_table(findings))
    for finding in findings:
        out.print("\n".join(["", *_details(finding)]), highlight=False)
