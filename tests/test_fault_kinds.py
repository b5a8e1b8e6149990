"""Every fault kind is one whole declaration (issue 50): a kind that lacks a part fails here.

:func:`kind_problems` reads a :class:`~chaos_ext._core.ledger.FaultKind` and
what it points to (the activities, their declared roles, the plan's
signature, the undo, the scan, the docs page, the failpoints in the code)
and lists what is missing or wrong. Each registered kind must have none; a
declaration with a part taken away must be named by it (so the check is not
satisfied by anything). The behaviour of each kind (it records before it
acts, its rollback undoes it, the entry is of its declared kind) is checked
against real targets in tests/test_conventions_behaviour.py, and its crash
cells in tests/crash/test_crash_matrix.py.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.gameday_cli import run_gameday
from support.harness import ROOT

import chaos_ext
from chaos_ext._core.contract import role_of
from chaos_ext._core.ledger import FAULT_KINDS, FaultKind

KINDS = FAULT_KINDS.load_all()
BY_NAME = {k.name: k for k in KINDS}
_SOURCE = "\n".join(p.read_text() for p in Path(chaos_ext.__file__).parent.rglob("*.py"))


def _parameters(func: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.default, p.kind) for p in inspect.signature(func).parameters.values()]


def _in_code(point: str) -> bool:
    """``failpoint("a.b")``, or ``failpoint(f"{KIND}.b")`` with a kind constant."""
    suffix = "." + point.rpartition(".")[2]
    spelled = (re.escape(f'"{point}"'), r'f"\{[A-Z_]+\}' + re.escape(f'{suffix}"'))
    return any(re.search(r"failpoint\(" + s, _SOURCE) for s in spelled)


def _fault_parts(kind: FaultKind) -> list[str]:
    problems = []
    if not kind.actions:
        problems.append("no fault action")
    module = importlib.import_module(kind.module)
    rollback = getattr(module, kind.rollback, None)
    if (role_of(rollback) if rollback else None) != {"role": "rollback"}:
        problems.append(f"rollback {kind.rollback!r} is not a rollback activity of {kind.module}")
    for name, plan in kind.actions.items():
        action = getattr(module, name, None)
        role = role_of(action) if action else None
        if role != {"role": "fault", "rollback": kind.rollback}:
            problems.append(f"{name}: declared role {role}, not a fault undone by {kind.rollback}")
            continue
        if plan is None:
            problems.append(f"{name}: no plan (gameday plan could not show it)")
        elif _parameters(plan) != _parameters(action):
            problems.append(f"{name}: its plan does not take the action's arguments")
    if kind.scan is None:
        problems.append("no scan: gameday ledger --scan could not find it without a ledger")
    if not kind.failpoints:
        problems.append("no failpoints for the crash matrix (mid-apply, mid-undo)")
    problems += [f"failpoint {p!r} is not in the code" for p in kind.failpoints if not _in_code(p)]
    return problems


def kind_problems(kind: FaultKind) -> list[str]:
    """What ``kind`` lacks, or declares wrongly (empty: whole)."""
    problems = []
    if not re.fullmatch(r"[a-z][a-z0-9-]+", kind.name):
        problems.append(f"name {kind.name!r}: lower-case words joined by '-'")
    if len(inspect.signature(kind.undo).parameters) != 1:
        problems.append("undo does not take one ledger entry")
    if not kind.summary or kind.summary == kind.name:
        problems.append("no summary")
    docs = ROOT / kind.docs if kind.docs else None
    if docs is None or not docs.is_file():
        problems.append(f"docs page {kind.docs!r} does not exist")
    elif kind.role == "fault":
        text = docs.read_text()
        problems += [f"{docs.name} never names {a}" for a in kind.actions if a not in text]
    if kind.role == "fault":
        problems += _fault_parts(kind)
    if kind.role == "adoption" and not (kind.adopts in BY_NAME or kind.scan is not None):
        problems.append(f"adopts {kind.adopts!r}: neither a kind nor a scan of its own")
    return problems


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_every_kind_is_whole(kind: FaultKind) -> None:
    assert kind_problems(kind) == []


@pytest.mark.parametrize(
    ("part", "value", "named"),
    [
        ("actions", {}, "no fault action"),
        ("scan", None, "no scan"),
        ("failpoints", (), "no failpoints"),
        ("failpoints", ("dns-rate-limit.mid-nowhere",), "is not in the code"),
        ("rollback", "limit_dns_rate", "is not a rollback activity"),
        ("docs", "docs/nowhere.md", "does not exist"),
        ("undo", lambda: None, "does not take one ledger entry"),
    ],
)
def test_a_kind_with_a_part_taken_away_is_named(part: str, value: object, named: str) -> None:
    broken = dataclasses.replace(BY_NAME["dns-rate-limit"], **{part: value})
    assert any(named in p for p in kind_problems(broken)), kind_problems(broken)


def test_a_plan_that_does_not_take_the_actions_arguments_is_named() -> None:
    def plan_limit_dns_rate(pps: int = 1) -> dict[str, object]:
        return {}

    rate = BY_NAME["dns-rate-limit"]
    broken = dataclasses.replace(rate, actions={"limit_dns_rate": plan_limit_dns_rate})
    assert any("does not take the action's arguments" in p for p in kind_problems(broken))


def test_every_fault_action_is_declared_by_exactly_one_kind() -> None:
    declared = [(k.module, a) for k in KINDS for a in k.actions]
    assert len(declared) == len(set(declared))
    for module_name, kind in chaos_ext.activity_modules():
        if kind != "action":
            continue
        module = importlib.import_module(module_name)
        for name in module.__all__:
            role = (role_of(getattr(module, name)) or {}).get("role")
            if role in ("fault", "remedy"):
                assert (module_name, name) in declared, f"{module_name}.{name}: no FaultKind"


_FRESH = """
import json, sys
from chaos_ext._core.ledger import FAULT_KINDS, Entry
found = {}
for kind, module in json.loads(sys.argv[1]):
    entry = Entry("0" * 16, kind, "t", module, {}, "run", 1, None, 0.0)
    undo = FAULT_KINDS.handler_for(entry)
    found[kind] = f"{undo.__module__}.{undo.__qualname__}"
print(json.dumps(found))
"""


def test_a_fresh_process_finds_each_kinds_undo_from_the_entry_alone() -> None:
    """``gameday rollback`` imports nothing first: the entry's module leads to the kind."""
    asked = [[k.name, k.module or k.undo.__module__] for k in KINDS]
    done = subprocess.run(
        [sys.executable, "-c", _FRESH, json.dumps(asked)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=ROOT,
    )
    found = json.loads(done.stdout)
    assert found == {k.name: f"{k.undo.__module__}.{k.undo.__qualname__}" for k in KINDS}


def test_gameday_faults_lists_every_kind_with_its_parts(tmp_path: Path) -> None:
    done = run_gameday(tmp_path, tmp_path / "ledger.sqlite3", "faults", "--json")
    assert done.returncode == 0, done.stderr
    listed = {k["kind"]: k for k in json.loads(done.stdout)}
    assert set(listed) == set(BY_NAME)
    for name, kind in BY_NAME.items():
        shown = listed[name]
        assert shown["role"] == kind.role
        assert shown["undo"].endswith(kind.undo.__qualname__)
        if kind.role == "fault":
            assert shown["rollback"] == kind.rollback
            assert all(shown["plan"].values()), name
            assert shown["scan"]["looks_for"] == kind.scan.looks_for  # type: ignore[union-attr]
            assert shown["watchdog"] == bool(kind.ends_by_itself)
            assert (ROOT / shown["docs"]).is_file()


def test_an_action_of_another_library_has_no_kind() -> None:
    """``os.mkdir`` in a method (any Python provider) is no fault kind's: looked up, it is
    None, never an import error that would stop the run (the privilege check asks for each)."""
    assert FAULT_KINDS.for_action("os", "mkdir") is None
    assert FAULT_KINDS.for_action("json", "dumps") is None
    assert FAULT_KINDS.for_action("chaos_ext.dns.actions", "no_such_action") is None
    assert (
        FAULT_KINDS.for_action("chaos_ext.dns.actions", "limit_dns_rate")
        is BY_NAME["dns-rate-limit"]
    )
