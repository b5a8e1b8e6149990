"""Small fault actions on a real nftables table, one keeping the rules and some breaking one.

For tests/test_conventions_behaviour.py (issue 28): each adds a table in a
scratch network namespace the test created, so the behaviour check runs the
same code path as for the real fault actions. Every one passes the text
checker (support.conventions); the behaviour check names what each breaks.
"""

from __future__ import annotations

import subprocess
import uuid
from contextlib import AbstractContextManager
from typing import Any

from chaos_ext._core.contract import (
    LEDGER_ID,
    Configuration,
    Secrets,
    fault_action,
    roll_back,
    rollback_activity,
)
from chaos_ext._core.ledger import Entry, default_ledger, fault, new_entry_id, undo_handler
from chaos_ext._core.validation import validated_by
from support.dns_netlab import netns_tables

__all__ = [
    "ACTIVITIES",
    "add_table",
    "drop_nothing",
    "drop_tables",
    "flush",
    "made_up_id",
    "never_record",
    "touch_then_record",
]

ACTIVITIES = (
    "add_table",
    "touch_then_record",
    "never_record",
    "made_up_id",
    "drop_tables",
    "drop_nothing",
)
TABLE_KIND = "conventions-test-table"


def _nft(ns: str, *args: str) -> None:
    subprocess.run(["ip", "netns", "exec", ns, "nft", *args], check=True, timeout=10)


def _new_table() -> str:
    return f"gdconv_{uuid.uuid4().hex[:8]}"


def _recorded(ns: str, table: str) -> AbstractContextManager[Entry]:
    recipe = {"netns": ns, "table": table}
    return fault(kind=TABLE_KIND, target=f"netns:{ns}", recipe=recipe, module=__name__)


@undo_handler(TABLE_KIND)
def _drop_table(entry: Entry) -> str:
    ns, table = entry.recipe["netns"], entry.recipe["table"]
    if f"inet {table}" not in netns_tables(ns):
        return f"table {table} already gone"
    _nft(ns, "delete", "table", "inet", table)
    return f"table inet {table} deleted"


@fault_action(rollback="drop_tables")
@validated_by()
def add_table(
    netns: str, configuration: Configuration = None, secrets: Secrets = None
) -> dict[str, Any]:
    """Add an nftables table in a scratch namespace, recorded first; rollback: drop_tables."""
    table = _new_table()
    with _recorded(netns, table) as entry:
        _nft(netns, "add", "table", "inet", table)
    return {LEDGER_ID: entry.id, "table": table}


@fault_action(rollback="drop_tables")
@validated_by()
def touch_then_record(
    netns: str, configuration: Configuration = None, secrets: Secrets = None
) -> dict[str, Any]:
    """Add a table, then record it (order broken on purpose); rollback: drop_tables."""
    table = _new_table()
    _nft(netns, "add", "table", "inet", table)
    with _recorded(netns, table) as entry:
        pass
    return {LEDGER_ID: entry.id, "table": table}


@fault_action(rollback="drop_tables")
@validated_by()
def never_record(
    netns: str, configuration: Configuration = None, secrets: Secrets = None
) -> dict[str, Any]:
    """Add a table and record nothing (broken on purpose: issue 28); rollback: drop_tables."""
    _nft(netns, "add", "table", "inet", _new_table())
    return {LEDGER_ID: None}


@fault_action(rollback="drop_tables")
@validated_by()
def made_up_id(
    netns: str, configuration: Configuration = None, secrets: Secrets = None
) -> dict[str, Any]:
    """Add a recorded table, return an id never written (broken); rollback: drop_tables."""
    table = _new_table()
    with _recorded(netns, table):
        _nft(netns, "add", "table", "inet", table)
    return {LEDGER_ID: new_entry_id()}


@rollback_activity
@validated_by()
def drop_tables(
    include_dead_runs: bool = False, configuration: Configuration = None, secrets: Secrets = None
) -> dict[str, Any]:
    """Delete the tables this run's table faults added (their rollback)."""
    book = default_ledger()
    tables = [e for e in book.open_entries() if e.kind == TABLE_KIND]
    return roll_back(tables, book, include_dead_runs=include_dead_runs)


@rollback_activity
@validated_by()
def drop_nothing(
    include_dead_runs: bool = False, configuration: Configuration = None, secrets: Secrets = None
) -> dict[str, Any]:
    """Claim to undo the table faults and undo none (broken on purpose)."""
    return {"undone": 0, "faults": [], "left_alone": []}


def flush(ns: str) -> None:
    """Undo this run's table faults, then remove whatever a broken one left in ``ns``."""
    drop_tables()
    _nft(ns, "flush", "ruleset")
