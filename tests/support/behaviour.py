"""The behaviour half of the conventions check (issue 28): what a fault action *does*.

:func:`fault_problems` calls one fault action against a real target and its
rollback activity after it, and returns what breaks docs/conventions.md §2-§3,
as sentences (like :func:`support.conventions.problems_of` for the text rules):

1. **the ledger entry comes before any change**: a listener of the ledger
   (:func:`chaos_ext._core.ledger.add_listener`, called by ``Ledger.record``
   right after the entry is durably written and before ``fault(...)`` hands
   it to the action's body) reads the target from its own interface (``tc``,
   ``nft``, ``ss``, ``pg_stat_activity``, dnsmasq's query log, the HTTP
   server's counter, the Kubernetes API) at that moment: it must still be
   what it was before the call;
2. **the action returns the id of that entry** under ``ledger_id``: one of
   the entries it opened, as the ledger file holds it (not None, not an id
   of its own making);
3. **its rollback activity undoes it**: called with no arguments, as the
   conventions ask, it leaves every entry the action opened closed in the
   ledger file, and the target as it was before the call.

``settle_seconds``: how long the target may take to come back (a helper's exit).
``live`` says whether the target must show the fault once the action has
returned (so a state reader that cannot see the fault fails, instead of
passing every rule); ``flood_dns`` blocks until its flood is over.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from chaos_ext._core.contract import LEDGER_ID
from chaos_ext._core.ledger import Entry, Ledger, add_listener, remove_listener

__all__ = [
    "BEFORE",
    "NOT_LIVE",
    "NOT_RESTORED",
    "NOT_UNDONE",
    "NO_ENTRY",
    "WRONG_ID",
    "fault_problems",
    "settled",
]

NO_ENTRY = "it records no ledger entry (chaos_ext._core.ledger.fault) before it acts"
BEFORE = "the target changed before the ledger entry was written"
NOT_LIVE = "the target shows no fault once the action returned"
WRONG_ID = f"it returns {LEDGER_ID}"
NOT_UNDONE = "its rollback activity leaves the entry open in the ledger"
NOT_RESTORED = "after its rollback activity the target is not as it was"
UNDECLARED = "the kind it records is not the FaultKind that declares this action"

State = Callable[[], Any]


def settled(state: State, wanted: Any, seconds: float = 15.0) -> Any:
    """``state()`` once it equals ``wanted`` (helpers take a moment to exit), or the last one."""
    deadline = time.monotonic() + seconds
    now = state()
    while now != wanted and time.monotonic() < deadline:
        time.sleep(0.2)
        now = state()
    return now


class _Watch:
    """What the target looked like each time the ledger opened an entry during the call."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.opened: list[tuple[Entry, Any]] = []

    def __call__(self, event: str, entry: Entry) -> None:
        if event != "open":
            return
        try:
            seen = self.state()
        except Exception as exc:  # noqa: BLE001 - a listener's error would be logged and lost
            seen = f"the state reader failed: {type(exc).__name__}: {exc}"
        self.opened.append((entry, seen))


def _called(act: Callable[[], Mapping[str, Any]], watch: _Watch) -> Mapping[str, Any]:
    add_listener(watch)
    try:
        return act()
    finally:
        remove_listener(watch)


def _id_problems(result: Mapping[str, Any], opened: list[str], ledger: Path) -> list[str]:
    returned = result.get(LEDGER_ID)
    written = Ledger(ledger).get(returned) if isinstance(returned, str) and returned else None
    if written is not None and returned in opened:
        return []
    return [
        f"{WRONG_ID} {returned!r}, not the id of the entry it wrote"
        f" ({opened or 'none'}; in the ledger file: {written is not None})"
    ]


def fault_problems(
    *,
    act: Callable[[], Mapping[str, Any]],
    rollback: Callable[[], Any],
    state: State,
    ledger: Path,
    live: bool = True,
    settle_seconds: float = 15.0,
    declared: str | None = None,
) -> list[str]:
    """Everything the fault action ``act`` and its ``rollback`` do against §2-§3 (see above);
    with ``declared`` (a kind's name), the entries it writes must be of that kind."""
    baseline = state()
    watch = _Watch(state)
    result = _called(act, watch)
    problems: list[str] = []
    if not watch.opened:
        problems.append(NO_ENTRY)
    elif watch.opened[0][1] != baseline:
        problems.append(f"{BEFORE}: {baseline!r} -> {watch.opened[0][1]!r}")
    after = state()
    if live and after == baseline:
        problems.append(f"{NOT_LIVE}: still {after!r} (can the state reader see it?)")
    opened = [e.id for e, _ in watch.opened]
    problems += _id_problems(result, opened, ledger)
    kinds = sorted({e.kind for e, _ in watch.opened})
    if declared is not None and kinds and kinds != [declared]:
        problems.append(f"{UNDECLARED} ({declared!r}): it records {kinds}")
    rollback()
    book = Ledger(ledger)
    left_open = [i for i in opened if (e := book.get(i)) is None or e.state != "closed"]
    if left_open:
        problems.append(f"{NOT_UNDONE}: {left_open}")
    restored = settled(state, baseline, settle_seconds)
    if restored != baseline:
        problems.append(f"{NOT_RESTORED}: {baseline!r} -> {restored!r}")
    return problems
