"""An undo whose target vanished closes the entry on the error's type, not its text.

The target checks are real (a namespace this test creates, then deletes; an
interface that is not in it); only the ledger entries are written by hand, as
an ``add_latency`` on a netem kernel would have written them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from chaos_ext._core.ledger import Ledger, undo
from chaos_ext.errors import TargetGone
from chaos_ext.network import _connect

_SNAPSHOT = {"default_root": True, "root_kind": None, "items": []}


def _entry(book: Ledger, target: str, interface: str) -> str:
    recipe = {
        "target": target,
        "interface": interface,
        "spec": {},
        "snapshot": _SNAPSHOT,
        "connection": {},
    }
    return book.record(
        kind="netem",
        target=f"{target}/{interface}",
        recipe=recipe,
        module="chaos_ext.network.actions",
    ).id


def test_a_vanished_namespace_closes_the_entry(ledger_path: Path, netns_name: str) -> None:
    subprocess.run(["ip", "netns", "add", netns_name], check=True, timeout=10)
    book = Ledger(ledger_path)
    entry_id = _entry(book, f"netns:{netns_name}", "eth0")
    subprocess.run(["ip", "netns", "delete", netns_name], check=True, timeout=10)
    with (
        pytest.raises(TargetGone),
        _connect.executor_from_recipe({"target": f"netns:{netns_name}"}) as executor,
    ):
        executor.snapshot("eth0")
    outcome = undo(book.get(entry_id), book)  # type: ignore[arg-type]
    assert outcome.ok, outcome.note
    assert "target gone, so is the delay" in outcome.note
    assert book.get(entry_id).state == "closed"  # type: ignore[union-attr]


def test_a_vanished_interface_closes_the_entry(ledger_path: Path, netns_name: str) -> None:
    subprocess.run(["ip", "netns", "add", netns_name], check=True, timeout=10)
    try:
        book = Ledger(ledger_path)
        entry_id = _entry(book, f"netns:{netns_name}", "gdt-veth-gone")
        outcome = undo(book.get(entry_id), book)  # type: ignore[arg-type]
    finally:
        subprocess.run(["ip", "netns", "delete", netns_name], check=True, timeout=10)
    assert outcome.ok and "interface 'gdt-veth-gone' not found" in outcome.note
