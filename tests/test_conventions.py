"""Every activity follows docs/conventions.md; and this test fails when one does not.

The walk covers whatever ``chaos_ext.activity_modules()`` finds, so an
activity added by any domain tomorrow is checked the same way. The second
half feeds the checker activities that each break one rule, to show that it
notices.

This file reads text. What a fault action does (its ledger entry written
before it touches anything, the returned ``ledger_id`` that entry's, its
rollback activity undoing it) is checked by behaviour, against real
targets, in tests/test_conventions_behaviour.py (issue 28).
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.conventions import TIME_WORDS, export_problems, problems_of

from chaos_ext import activity_modules
from chaos_ext._core.contract import (
    LEDGER_ID,
    Configuration,
    Secrets,
    fault_action,
    plan_function_of,
    remedy_action,
    role_of,
    rollback_activity,
)
from chaos_ext._core.validation import validated_by

ACTIVITIES = [
    (module_name, kind, name)
    for module_name, kind in activity_modules()
    for name in importlib.import_module(module_name).__all__
]


def _param(module_name: str, kind: str, name: str) -> Any:
    return pytest.param(module_name, kind, name, id=f"{module_name}.{name}")


@pytest.mark.parametrize(("module_name", "kind", "name"), [_param(*a) for a in ACTIVITIES])
def test_activity_follows_the_conventions(module_name: str, kind: str, name: str) -> None:
    module = importlib.import_module(module_name)
    assert problems_of(module, name, getattr(module, name), kind=kind) == []


def every_problem(modules: list[tuple[str, str]]) -> list[str]:
    """Every problem of every activity of ``modules`` (``(module, kind)``), each named."""
    found: list[str] = []
    for module_name, kind in modules:
        module = importlib.import_module(module_name)
        found += export_problems(module)
        for name in getattr(module, "__all__", []):
            found += [
                f"{module_name}.{name}: {p}"
                for p in problems_of(module, name, getattr(module, name), kind=kind)
            ]
    return found


def test_every_activity_follows_the_conventions() -> None:
    """One failure that lists every problem of every activity, not the first one only."""
    problems = every_problem(activity_modules())
    assert not problems, "\n".join(["conventions broken (docs/conventions.md):", *problems])


def test_the_time_words_are_an_explicit_list() -> None:
    assert {"pause", "wait", "interval", "grace", "timeout", "duration"} <= TIME_WORDS


def test_every_domain_with_faults_has_actions() -> None:
    assert len(ACTIVITIES) > 30
    kinds = {kind for _, kind, _ in ACTIVITIES}
    assert kinds == {"action", "probe"}


ROLLBACKS = [
    pytest.param(m, n, id=f"{m}.{n}")
    for m, k, n in ACTIVITIES
    if k == "action"
    and (role_of(getattr(importlib.import_module(m), n)) or {}).get("role") == "rollback"
]


@pytest.mark.parametrize(("module_name", "name"), ROLLBACKS)
def test_rollback_activities_on_an_empty_ledger_undo_nothing(
    module_name: str, name: str, ledger_path: Path
) -> None:
    """Called with no arguments and nothing recorded, each returns the empty result."""
    result = getattr(importlib.import_module(module_name), name)()
    assert {k: result[k] for k in ("undone", "faults", "left_alone")} == {
        "undone": 0,
        "faults": [],
        "left_alone": [],
    }


# -- the checker notices each kind of break -------------------------------------------


def _module(**functions: Callable[..., Any]) -> types.ModuleType:
    module = types.ModuleType("fake.actions")
    for name, func in functions.items():
        setattr(module, name, func)
    module.__all__ = sorted(functions)
    return module


@fault_action(rollback="undo_it")
@validated_by()
def inject(
    target: str,
    hold_seconds: float = 60,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Inject a pretend fault for the checker's own tests; rollback: ``undo_it``."""
    return {LEDGER_ID: "x", "target": target, "hold_seconds": hold_seconds}


@rollback_activity
@validated_by()
def undo_it(
    target: str = "",
    include_dead_runs: bool = False,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Undo the pretend fault of this run (the checker's own tests)."""
    return {"undone": 0, "faults": [], "left_alone": []}


@validated_by()
def probe_it(
    name: str,
    timeout_seconds: float = 1.0,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> float:
    """Measure something pretend for the checker's own tests."""
    return 1.0


def test_the_good_examples_pass() -> None:
    module = _module(inject=inject, undo_it=undo_it)
    assert problems_of(module, "inject", inject, kind="action") == []
    assert problems_of(module, "undo_it", undo_it, kind="action") == []
    assert problems_of(_module(probe_it=probe_it), "probe_it", probe_it, kind="probe") == []


def _time_unit_broken(
    timeout: float = 1.0, configuration: Configuration = None, secrets: Secrets = None
) -> float:
    """Measure something with a unit-less timeout (broken on purpose)."""
    return timeout


def _time_suffix_broken(
    wait_s: float = 0, configuration: Configuration = None, secrets: Secrets = None
) -> float:
    """Measure something with a _s suffix (broken on purpose)."""
    return wait_s


def _time_string_broken(
    window_seconds: str = "5m", configuration: Configuration = None, secrets: Secrets = None
) -> str:
    """Measure something with a window as text (broken on purpose)."""
    return window_seconds


def _pause_broken(
    pause: float = 1.0, configuration: Configuration = None, secrets: Secrets = None
) -> float:
    """Measure something after a pause with no unit (broken on purpose)."""
    return pause


def _untyped_configuration(
    name: str, configuration: dict[str, Any] | None = None, secrets: dict[str, Any] | None = None
) -> str:
    """Measure something with dict-typed configuration (broken on purpose)."""
    return name


def _no_injected(name: str) -> str:
    """Measure something without configuration and secrets (broken on purpose)."""
    return name


def _unchecked(name: str, configuration: Configuration = None, secrets: Secrets = None) -> str:
    """Measure something without checking its arguments when called (broken on purpose)."""
    return name


@pytest.mark.parametrize(
    ("func", "expected"),
    [
        (_time_unit_broken, "timeout: a time argument is named <what>_seconds"),
        (_time_suffix_broken, "wait_s: a time argument is named <what>_seconds"),
        (_pause_broken, "pause: a time argument is named <what>_seconds"),
        (_time_string_broken, "window_seconds: a time argument is a number of seconds"),
        (_untyped_configuration, "configuration: typed chaos_ext._core.contract.Configuration"),
        (_no_injected, "configuration and secrets must be the last two arguments"),
        (_unchecked, "an activity checks its arguments when called (@validated_by)"),
    ],
)
def test_a_probe_that_breaks_one_rule_fails(func: Callable[..., Any], expected: str) -> None:
    problems = problems_of(_module(probe=func), "probe", func, kind="probe")
    assert any(p.startswith(expected) for p in problems), problems


def _no_role(configuration: Configuration = None, secrets: Secrets = None) -> dict[str, Any]:
    """Change something without saying what kind of action this is (broken on purpose)."""
    return {}


@fault_action(rollback="missing_undo")
def _unpaired(configuration: Configuration = None, secrets: Secrets = None) -> dict[str, Any]:
    """Inject a fault whose rollback does not exist (broken on purpose)."""
    return {LEDGER_ID: "x"}


@fault_action(rollback="undo_it")
def _old_ledger_key(configuration: Configuration = None, secrets: Secrets = None) -> dict[str, Any]:
    """Inject a fault and return its id under the old key; rollback undo_it (broken)."""
    return {"ledger_entry": "x"}


@rollback_activity
def _unscoped_undo(
    target: str,
    this_run_only: bool = True,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Undo faults with the old scope flag and a required argument (broken on purpose)."""
    return {}


@remedy_action(reason="")
def _silent_remedy(configuration: Configuration = None, secrets: Secrets = None) -> dict[str, Any]:
    """Restart things without saying why it is not undone (broken on purpose)."""
    return {}


@pytest.mark.parametrize(
    ("func", "expected"),
    [
        (_no_role, "an action declares its role"),
        (_unpaired, "its rollback activity 'missing_undo' is not an activity of this module"),
        (_old_ledger_key, "returns 'ledger_entry': the ledger id key is 'ledger_id'"),
        (_unscoped_undo, "a rollback activity takes include_dead_runs: bool = False"),
        (_unscoped_undo, "a rollback activity runs with no arguments; ['target'] are required"),
        (_silent_remedy, "a remedy action says why it is not undone"),
    ],
)
def test_an_action_that_breaks_one_rule_fails(func: Callable[..., Any], expected: str) -> None:
    module = _module(action=func, undo_it=undo_it)
    problems = problems_of(module, "action", func, kind="action")
    assert any(p.startswith(expected) for p in problems), problems


def test_an_activity_left_out_of_all_fails() -> None:
    module = types.ModuleType(__name__)  # where probe_it is defined
    module.probe_it = probe_it  # type: ignore[attr-defined]
    module.__all__ = ["probe_it"]
    assert export_problems(module) == []
    module.__all__ = []
    assert export_problems(module) == [
        f"{__name__}.probe_it: an activity is listed in its module's __all__"
        " (chaoslib discovers only __all__; docs/conventions.md)"
    ]


def test_every_problem_of_every_activity_is_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two problems in one activity and one in another: all three are reported."""
    module = _module(probe_a=_no_injected, probe_b=_pause_broken)
    monkeypatch.setitem(sys.modules, "fake.actions", module)
    problems = every_problem([("fake.actions", "probe")])
    assert any(p.startswith("fake.actions.probe_a: configuration and secrets") for p in problems)
    assert any(p.startswith("fake.actions.probe_a: an activity checks its arg") for p in problems)
    assert any(p.startswith("fake.actions.probe_b: pause: a time argument") for p in problems)


def test_the_walk_itself_fails_on_a_broken_activity(monkeypatch: pytest.MonkeyPatch) -> None:
    """Break one real activity the way a careless change would: the walk's check fails."""
    module_name, _, name = next(a for a in ACTIVITIES if a[1] == "probe")
    test_activity_follows_the_conventions(module_name, "probe", name)  # it passes as it is
    module = importlib.import_module(module_name)
    monkeypatch.setattr(module, name, _time_unit_broken)
    with pytest.raises(AssertionError):
        test_activity_follows_the_conventions(module_name, "probe", name)


# -- no aliases: the old names are gone from what users read and run ---------------------

OLD_NAMES = (
    "delay_ms",
    "jitter_ms",
    "timeout_s",
    "wait_s",
    "min_age_s",
    "uncordon_after_s",
    "backoff_initial_s",
    "backoff_max_s",
    "grace_period_s",
    "interval_s",
    "from_s",
    "to_s",
    "only_started_before",
    "this_run_only",
    "ledger_entry",
    "load_id",
    "connect_timeout",
    "prometheus_timeout",
    "alertmanager_timeout",
    "start_delay",
)
_OLD = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(OLD_NAMES) + r")(?![A-Za-z0-9_])")
ROOT = Path(__file__).resolve().parents[1]


def old_names_in(text: str) -> list[str]:
    """The old argument and result names ``text`` still uses."""
    return sorted(set(_OLD.findall(text)))


def test_docs_and_experiments_use_only_the_new_names() -> None:
    paths = [
        *ROOT.glob("docs/*.md"),
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        *ROOT.glob("experiments/**/*.json"),
    ]
    found = {
        str(p.relative_to(ROOT)): names
        for p in paths
        if p.name != "conventions.md" and (names := old_names_in(p.read_text()))
    }
    assert found == {}


def test_the_old_name_check_notices_them() -> None:
    assert old_names_in('"delay_ms": 150, "timeout_s": 30, "ledger_entry": x') == [
        "delay_ms",
        "ledger_entry",
        "timeout_s",
    ]
    assert old_names_in("delay_seconds timeout_seconds ledger_id connect_timeout_seconds") == []


# --- §7: every fault action has a plan function (gameday plan) ----------------------

PLANS_NOT_WRITTEN_YET: frozenset[str] = frozenset()
"""Fault actions that have no plan function yet (``module.func``); docs/conventions.md §7
lists the same. Empty: every fault action has one. A new fault action comes with its plan."""

FAULTS = [
    pytest.param(m, n, id=f"{m}.{n}")
    for m, k, n in ACTIVITIES
    if k == "action"
    and (role_of(getattr(importlib.import_module(m), n)) or {}).get("role") == "fault"
]


@pytest.mark.parametrize(("module_name", "name"), FAULTS)
def test_fault_action_has_a_plan_function_with_its_arguments(module_name: str, name: str) -> None:
    planner = plan_function_of(module_name, name)
    if f"{module_name}.{name}" in PLANS_NOT_WRITTEN_YET:
        assert planner is None, f"{module_name}.{name} has a plan now: drop it from the list"
        return
    assert planner is not None, f"{module_name}.{name}: name its plan in its FaultKind (kinds.py)"
    action = inspect.signature(getattr(importlib.import_module(module_name), name))
    plan = inspect.signature(planner)
    assert [(p.name, p.default, p.kind) for p in plan.parameters.values()] == [
        (p.name, p.default, p.kind) for p in action.parameters.values()
    ]
    assert role_of(planner) is None  # a plan is no activity: it records and changes nothing
    assert planner.__doc__ and planner.__doc__.strip()


PLAN_PREFIX = "plan_"


def test_plan_modules_plan_only_fault_actions() -> None:
    faults = {(p.values[0], p.values[1]) for p in FAULTS}
    for module_name, _ in {(m, k) for m, k, _ in ACTIVITIES if k == "action"}:
        package = module_name.rpartition(".")[0]
        try:
            plans = importlib.import_module(f"{package}.plan")
        except ModuleNotFoundError:
            continue
        for exported in plans.__all__:
            assert exported.startswith(PLAN_PREFIX), f"{package}.plan.{exported}"
            assert (module_name, exported.removeprefix(PLAN_PREFIX)) in faults, exported
    assert len(FAULTS) >= 8
