"""``gameday gate --min-envelope ARGUMENT=FLOOR``: a release fails below a breaking-point floor."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from chaos_ext._products.envelope.document import envelope_exit_code
from chaos_ext._products.envelope.spec import envelope_extension
from chaos_ext._products.envelope.view import (
    EnvelopeView,
    check_floor,
    load_envelope,
    matches,
    parse_floor,
)
from chaos_ext._products.report.junit import Case
from chaos_ext._runner.execute import EXIT_DEVIATED, EXIT_FAILED, EXIT_HELD, EXIT_INVALID
from chaos_ext._runner.experiments import ExperimentInvalid, load_experiment
from chaos_ext.cli.envelope import search_envelope
from chaos_ext.errors import InvalidArgument

__all__ = ["Floors", "envelope_suite", "parse_floors", "search_envelopes"]

Floors = list[tuple[str, float]]
Suite = tuple[str, list[Case], dict[str, str]]


def parse_floors(items: Sequence[str], console: Console) -> Floors | None:
    """``["delay_seconds=0.2"]`` -> ``[("delay_seconds", 0.2)]``; None (and a line) if bad."""
    floors = []
    for item in items:
        try:
            floors.append(parse_floor(item))
        except ValueError as exc:
            console.print(f"[red]{escape(str(exc))}[/]", highlight=False)
            return None
    return floors


def _code(view: EnvelopeView, passed: bool) -> int:
    if passed:
        return EXIT_HELD
    # a search cut short by a failed run or a rollback problem is a failed gate, not a deviation
    return EXIT_FAILED if envelope_exit_code(view.envelope) == EXIT_FAILED else EXIT_DEVIATED


def envelope_suite(
    views: Sequence[EnvelopeView], floors: Floors, console: Console
) -> tuple[Suite, int]:
    """The ``gameday.envelope`` JUnit suite and the worst exit code of its checks.

    A floor that no envelope varies is invalid input (3): the gate was asked
    for a proof it was not given.
    """
    cases: list[Case] = []
    codes: list[int] = []
    for name, floor in floors:
        found = [v for v in views if matches(v, name)]
        if not found:
            console.print(
                f"[red]--min-envelope {escape(name)}: no envelope varies it "
                f"(given: {escape(', '.join(v.key for v in views) or 'none')})[/]",
                highlight=False,
            )
            codes.append(EXIT_INVALID)
            continue
        for view in found:
            check = check_floor(view, floor)
            case = Case(f"{view.key} holds at {floor:g} ({view.label})", "gameday.envelope")
            if not check.passed:
                case.kind, case.type, case.message = "failure", "BelowFloor", check.text
                case.details = [check.text, *view.envelope.non_monotone]
            cases.append(case)
            codes.append(_code(view, check.passed))
            colour = "green" if check.passed else "red"
            console.print(
                f"[{colour}]envelope {escape(view.label)} {escape(view.key)}: "
                f"{escape(check.text)}[/]",
                highlight=False,
            )
    props = {"floors": ", ".join(f"{n}={f:g}" for n, f in floors)}
    return ("gameday.envelope", cases, props), max(codes, default=EXIT_INVALID)


def search_envelopes(args: argparse.Namespace, console: Console) -> list[EnvelopeView] | int:
    """Search the envelope of every input experiment that sets one (``gameday gate
    EXPERIMENT --min-envelope``); the others stay in ``args.inputs`` to be run."""
    views, plain = [], []
    for name in args.inputs:
        try:
            configured = bool(envelope_extension(load_experiment(Path(name))).get("vary"))
        except (ExperimentInvalid, InvalidArgument):
            configured = False  # reported by the validation of the run that follows
        if not configured:
            plain.append(name)
            continue
        out = Path(args.journal_dir) / f"envelope-{Path(name).stem}"
        result = search_envelope(args, console, name, {"settle_seconds": args.settle}, out)
        if isinstance(result, int):
            return result
        views.append(load_envelope(result.path))
    if not views:
        console.print(
            '[red]--min-envelope: no experiment sets an envelope ("extensions": '
            '[{"name": "gameday", "envelope": {"vary": ...}}]); or '
            "read envelopes with --journals OUT[/]"
        )
        return EXIT_INVALID
    args.inputs = plain
    return views
