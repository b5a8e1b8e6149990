"""``gameday gate --min-envelope ARGUMENT=FLOOR``: a release fails below a breaking-point floor."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from chaos_ext.reporting.envelope import EnvelopeView, check_floor, matches, parse_floor
from chaos_ext.reporting.junit import Case
from chaos_ext.runner._envelope_doc import envelope_exit_code
from chaos_ext.runner.execute import EXIT_DEVIATED, EXIT_FAILED, EXIT_HELD, EXIT_INVALID

__all__ = ["Floors", "envelope_suite", "parse_floors"]

Floors = list[tuple[str, float]]
Suite = tuple[str, list[Case], dict[str, str]]


def parse_floors(items: Sequence[str], console: Console) -> Floors | None:
    """``["delay_ms=200"]`` -> ``[("delay_ms", 200.0)]``; None (and a line) if one is bad."""
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
            console.print(f"[red]--min-envelope {escape(name)}: no envelope varies it "
                          f"(given: {escape(', '.join(v.key for v in views) or 'none')})[/]",
                          highlight=False)  # fmt: skip
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
            console.print(f"[{colour}]envelope {escape(view.label)} {escape(view.key)}: "
                          f"{escape(check.text)}[/]", highlight=False)  # fmt: skip
    props = {"floors": ", ".join(f"{n}={f:g}" for n, f in floors)}
    return ("gameday.envelope", cases, props), max(codes, default=EXIT_INVALID)
