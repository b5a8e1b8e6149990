"""The undo handlers as an object (chaos_ext._core.ledger.handlers.FaultKinds).

Registration, the errors for a kind nobody registers, the scoped swap the
mutation check relies on (and that it comes back), and the mutation check's
own start-up hook (tests/support/mutant_site) in a real interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.harness import MUTANT_SITE, ROOT, TESTS

from chaos_ext._core import ledger
from chaos_ext._core.ledger import Entry, FaultKinds, Ledger, undo
from chaos_ext.errors import RollbackFailed


def _entry(kind: str, module: str = __name__) -> Entry:
    pid = os.getpid()
    return Entry(
        id=ledger.new_entry_id(),
        kind=kind,
        target="nothing",
        module=module,
        recipe={},
        run_id="run-test",
        owner_pid=pid,
        owner_start=None,
        created_at=time.time(),
    )


def _real(entry: Entry) -> str:
    return f"really undone {entry.id}"


def _noop(entry: Entry) -> str:
    return "did nothing"


def test_register_lookup_and_kinds() -> None:
    registry = FaultKinds()
    assert registry.register("b-kind")(_real) is _real  # a decorator: the function stays
    registry.register("a-kind")(_noop)
    assert registry.kinds() == ["a-kind", "b-kind"]
    entry = _entry("b-kind")
    assert registry.handler_for(entry)(entry) == f"really undone {entry.id}"
    assert registry.registered("c-kind") is None


def test_an_unknown_kind_and_an_unimportable_module_are_clear_errors() -> None:
    registry = FaultKinds()
    with pytest.raises(RollbackFailed, match=r"no fault kind 'x-k' declared by json"):
        registry.handler_for(_entry("x-k", module="json"))  # imported, registers nothing
    with pytest.raises(RollbackFailed, match=r"cannot import 'no_such_mod_28' to undo x-k"):
        registry.handler_for(_entry("x-k", module="no_such_mod_28"))


def test_the_module_named_in_the_entry_is_imported_to_find_its_handler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "handlers_mod_28.py").write_text(
        "from chaos_ext._core.ledger import undo_handler\n"
        "@undo_handler('imported-kind')\n"
        "def undo_it(entry):\n"
        "    return 'undone by the imported module'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "handlers_mod_28" not in sys.modules
    entry = _entry("imported-kind", module="handlers_mod_28")
    assert ledger.FAULT_KINDS.handler_for(entry)(entry) == "undone by the imported module"
    assert "imported-kind" in ledger.FAULT_KINDS.kinds()


def test_a_swap_is_scoped_and_built_from_the_real_handler() -> None:
    registry = FaultKinds()
    registry.register("s-kind")(_real)
    entry, given = _entry("s-kind"), []

    def replace(real: ledger.UndoHandler) -> ledger.UndoHandler:
        given.append(real)
        return _noop

    with registry.swapped("s-kind", replace):
        assert registry.handler_for(entry) is _noop
        assert registry.registered("s-kind") is _real  # what is registered is untouched
        with registry.swapped("s-kind", lambda real: _real):  # nested: the inner one wins
            assert registry.handler_for(entry) is _real
        assert registry.handler_for(entry) is _noop  # and the outer one is back
    assert registry.handler_for(entry) is _real
    assert given == [_real, _real]
    with pytest.raises(KeyError), registry.swapped("s-kind", replace):
        raise KeyError("a test failed inside")
    assert registry.handler_for(entry) is _real  # restored on the way out of a failure too


def test_a_swap_of_the_ledgers_registry_is_what_undo_runs(ledger_path: Path) -> None:
    ledger.undo_handler("swap-test")(_real)
    book = Ledger(ledger_path)
    first = book.record(kind="swap-test", target="t", recipe={}, module=__name__)
    second = book.record(kind="swap-test", target="t", recipe={}, module=__name__)
    with ledger.FAULT_KINDS.swapped("swap-test", lambda real: _noop):
        swapped = undo(first, book)
    after = undo(second, book)
    assert (swapped.ok, swapped.note) == (True, "did nothing")
    assert (after.ok, after.note) == (True, f"really undone {second.id}")


def test_the_mutation_checks_startup_hook_swaps_one_kind_for_the_process(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    script = (
        "import os, time\n"
        "from chaos_ext._core import ledger\n"
        "from chaos_ext._core.ledger import Entry\n"
        "def entry(kind, module):\n"
        "    return Entry(id='e1', kind=kind, target='t', module=module, recipe={},"
        " run_id='r', owner_pid=os.getpid(), owner_start=None, created_at=time.time())\n"
        "netem = entry('netem', 'chaos_ext.network.actions')\n"
        "print(ledger.FAULT_KINDS.handler_for(netem)(netem))\n"
        "other = entry('node-drain', 'chaos_ext.node.actions')\n"
        "print(ledger.FAULT_KINDS.handler_for(other).__name__)\n"
    )
    env = {
        **os.environ,
        "GAMEDAY_MUTANT_UNDO": "netem",
        "GAMEDAY_MUTANT_LOG": str(calls),
        "PYTHONPATH": os.pathsep.join([str(MUTANT_SITE), str(TESTS), str(ROOT)]),
    }
    ran = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    mutant, other = ran.stdout.splitlines()
    assert mutant == "mutant undo: did nothing"
    assert other != "noop"  # another kind keeps its real handler
    assert calls.read_text().split()[1:] == ["netem", "e1"]
