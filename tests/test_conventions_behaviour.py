"""Every fault action records before it acts, returns that entry's id, and its rollback undoes it.

The behaviour half of docs/conventions.md §2-§3 (issue 28): tests/test_conventions.py
reads an activity's text, so an action returning ``{"ledger_id": None}`` passes
it; here each fault action runs against a real, throwaway target and
:func:`support.behaviour.fault_problems` checks what it did:

* a listener of the ledger (``chaos_ext._core.ledger.add_listener``: the
  ledger's own hook, called by ``Ledger.record`` once the entry is durably
  written and before ``fault(...)`` runs the action's body) reads the target
  from its own interface at that moment, and it must still be as before;
* the returned ``ledger_id`` must be an entry the call opened, in the file;
* the action's declared rollback activity, called with no arguments, must
  close that entry and put the target back.

The listener was chosen over a failpoint because it observes the real action
run to its end (the failpoint stops it, so the id and rollback rules could
not be checked in the same call) and needs no change to product code.

The second half feeds the same check small fault actions that each break one
rule, acting on a real nftables table in a scratch namespace: touching the
target before recording, recording nothing and returning ``{"ledger_id":
None}``, returning a made-up id, and a rollback that undoes nothing. The text
checker passes every one of them; this one names each break.

netem: this host's kernel has no sch_netem. On a kernel with it, ``add_latency``
runs the whole check (this file is not in the VM lane, whose files hold only
``vm`` tests); without it, its kernel preflight is bypassed
so the action gets past its ledger entry into its apply, which the kernel
refuses at the netem qdisc: the ordering rule, and that the failed apply is
undone, are checked for real on the qdisc tree; the id and rollback rules
for netem only where the kernel has netem.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support import behaviour as b
from support import table_faults as tables
from support.behaviour import fault_problems
from support.conventions import problems_of
from support.crash_targets import (  # noqa: F401 - the targets, as fixtures
    cluster,
    dns_server,
    pg_server,
    resolvers,
    web,
)
from support.crashkit import (
    PASSWORD,
    configmap_state,
    dns_errors_state,
    dns_flood_state,
    dns_hold_state,
    nft_state,
    node_state,
    pg_state,
    web_state,
)
from support.dns_netlab import SERVER_IP, ResolverPair, netns_tables
from support.k8s_emulator import EmulatorHandle
from support.netlab import VethNs, kernel_has_netem, tc_show, veth_in_new_netns

from chaos_ext import activity_modules
from chaos_ext._core.contract import LEDGER_ID, role_of
from chaos_ext._core.ledger import (
    FAULT_KINDS,
    Entry,
    Ledger,
    add_listener,
    default_ledger,
    remove_listener,
)
from chaos_ext.network import _local
from chaos_ext.network.actions import add_latency
from chaos_ext.network.errors import NetworkError

HAS_NETEM = kernel_has_netem()
LOAD_NS = "loadtest"
FAULTS = sorted(
    f"{m}.{n}"
    for m, kind in activity_modules()
    if kind == "action"
    for n in importlib.import_module(m).__all__
    if (role_of(getattr(importlib.import_module(m), n)) or {}).get("role") == "fault"
)

# -- throwaway targets, one each per module -------------------------------------------


@pytest.fixture(scope="module")
def veth() -> Iterator[VethNs]:
    with veth_in_new_netns("gdc") as made:
        yield made


def _load_job_state(api: EmulatorHandle) -> dict[str, list[str]]:
    """The load's Job, its Secret and pods in the namespace, as the API server lists them."""
    return {
        kind: sorted(c["metadata"]["name"] for c in api.items(kind, LOAD_NS))
        for kind in ("Job", "Secret", "Pod")
    }


@dataclass(frozen=True)
class Cell:
    """One fault action against one target: its arguments and the target's own state."""

    fault: str  # module.func
    fixture: str
    arguments: Callable[[Any], dict[str, Any]]
    state: Callable[[Any], Any]
    live: bool = True
    kubernetes: bool = False
    needs_netem: bool = False  # without sch_netem: _netem_ordering_only instead


CELLS = {
    "dns-hold": Cell(
        "chaos_ext.dns.actions.saturate_dnsmasq_tcp",
        "dns_server",
        lambda s: {"server": s.address, "port": s.port, "connections": 3, "hold_seconds": 45},
        dns_hold_state,
    ),
    "dns-flood": Cell(
        "chaos_ext.dns.actions.flood_dns",
        "dns_server",
        lambda s: {
            "server": s.address,
            "port": s.port,
            "names": ["www.example.test"],
            "qps": 50,
            "duration_seconds": 2,
        },
        dns_flood_state,
        live=False,  # it blocks until the flood is over, and closes its entry itself
    ),
    "dns-rate-limit": Cell(
        "chaos_ext.dns.actions.limit_dns_rate",
        "resolvers",
        lambda p: {"pps": 100, "target": p.target},
        nft_state,
    ),
    "dns-errors": Cell(
        "chaos_ext.dns.actions.inject_dns_errors",
        "resolvers",
        lambda p: {
            "patterns": ["www.*"],
            "error": "nxdomain",
            "target": p.target,
            "resolvers": [SERVER_IP],
            "duration_seconds": 120,
        },
        dns_errors_state,
    ),
    "db-exhaustion": Cell(
        "chaos_ext.db.actions.exhaust_connections",
        "pg_server",
        lambda s: {
            "engine": "postgresql",
            "host": s.host,
            "port": s.port,
            "database": s.database,
            "target": 4,
            "hold_seconds": 45,
            "secrets": {"user": s.user, "password": PASSWORD},
        },
        pg_state,
    ),
    "load": Cell(
        "chaos_ext.load.actions.drive_http_load",
        "web",
        lambda s: {"urls": [s.url], "rate": 20, "duration_seconds": 45, "processes": 1},
        web_state,
    ),
    "load-job": Cell(
        "chaos_ext.load.actions.drive_http_load",
        "cluster",
        lambda c: {
            "urls": ["http://web.shop.svc:8080/"],
            "rate": 30,
            "duration_seconds": 45,
            "replicas": 2,
            "kubernetes": {"namespace": LOAD_NS, "pushgateway": "http://127.0.0.1:9"},
        },
        _load_job_state,
        kubernetes=True,
    ),
    "drain": Cell(
        "chaos_ext.node.actions.drain_nodes",
        "cluster",
        lambda c: {"label_selector": "role=eat-workers", "count": 1, "pick": "first"},
        node_state,
        kubernetes=True,
    ),
    "sidecar-template": Cell(
        "chaos_ext.sidecar.actions.change_sidecar_template",
        "cluster",
        lambda c: {"values_patch": {"global": {"tag": "1.23.0"}}},
        configmap_state,
        kubernetes=True,
    ),
    "netem": Cell(
        "chaos_ext.network.actions.add_latency",
        "veth",
        lambda v: {
            "interface": v.dev,
            "delay_seconds": 0.05,
            "destinations": ["10.9.0.0/24"],
            "target": f"netns:{v.ns}",
        },
        lambda v: tc_show(v.ns, v.dev),
        needs_netem=True,
    ),
}


def _function(path: str) -> Callable[..., Any]:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def _rollback_of(path: str) -> Callable[..., Any]:
    module = path.rpartition(".")[0]
    return _function(f"{module}.{(role_of(_function(path)) or {})['rollback']}")


def _cell_problems(
    cell: Cell, target: Any, ledger: Path, action: Callable[..., Any] | None = None
) -> list[str]:
    call = action or _function(cell.fault)
    module, _, func = cell.fault.rpartition(".")
    kind = FAULT_KINDS.for_action(module, func)
    return fault_problems(
        act=lambda: call(**cell.arguments(target)),
        rollback=_rollback_of(cell.fault),
        state=lambda: cell.state(target),
        ledger=ledger,
        live=cell.live,
        declared=kind.name if kind is not None else "(no FaultKind declares it)",
    )


def test_every_fault_action_has_a_behaviour_cell() -> None:
    """A fault action added tomorrow fails here until it runs against a real target."""
    assert sorted({c.fault for c in CELLS.values()}) == FAULTS


@pytest.mark.parametrize("cell_name", list(CELLS))
def test_a_fault_action_records_first_returns_its_entry_and_its_rollback_undoes_it(
    cell_name: str,
    request: pytest.FixtureRequest,
    ledger_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cell = CELLS[cell_name]
    target = request.getfixturevalue(cell.fixture)
    if cell.needs_netem and not HAS_NETEM:
        _netem_ordering_only(target, ledger_path, monkeypatch)
        return
    if cell.kubernetes:
        monkeypatch.setenv("KUBECONFIG", str(target.kubeconfig))
        monkeypatch.delenv("KUBERNETES_CONTEXT", raising=False)
    problems = _cell_problems(cell, target, ledger_path)
    assert problems == [], f"{cell.fault} (docs/conventions.md §2-§3): {problems}"
    assert Ledger(ledger_path).open_entries() == []
    verdict = Ledger(ledger_path).verify(full=True)  # and the ledger agrees with itself
    assert verdict.ok, verdict.problems


def _netem_ordering_only(veth: VethNs, ledger_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No netem here: past a bypassed preflight the apply fails at the netem qdisc, after
    the htb root; the qdisc tree was untouched when the entry was written, and is after."""
    monkeypatch.setattr(_local, "missing_features", lambda: [])
    baseline = tc_show(veth.ns, veth.dev)
    seen: list[tuple[str, str]] = []

    def listener(event: str, entry: Entry) -> None:
        if event == "open":
            seen.append((entry.id, tc_show(veth.ns, veth.dev)))

    add_listener(listener)
    try:
        with pytest.raises(NetworkError, match="installing the latency tree"):
            add_latency(veth.dev, 0.05, ["10.9.0.0/24"], target=f"netns:{veth.ns}")
    finally:
        remove_listener(listener)
    assert [tree for _, tree in seen] == [baseline]  # one entry, written before any change
    entry = Ledger(ledger_path).get(seen[0][0])
    assert entry is not None and entry.state == "closed"  # the failed apply was undone...
    assert "tree restored" in (entry.note or "")  # ...and had touched the tree (not "as before")
    assert tc_show(veth.ns, veth.dev) == baseline


# -- the check notices each kind of break ---------------------------------------------


@pytest.fixture
def scratch(veth: VethNs, ledger_path: Path) -> Iterator[str]:
    """The scratch namespace; whatever a broken activity left there is removed after."""
    yield veth.ns
    tables.flush(veth.ns)


def _table_problems(action: Callable[..., Any], rollback: Callable[..., Any], ns: str) -> list[str]:
    return fault_problems(
        act=lambda: action(netns=ns),
        rollback=rollback,
        state=lambda: netns_tables(ns),
        ledger=Path(default_ledger().path),
        settle_seconds=1,
    )


def test_the_text_checker_passes_every_broken_fake() -> None:
    """What issue 28 says: reading the text, every one of them looks right."""
    for name in tables.ACTIVITIES:
        assert problems_of(tables, name, getattr(tables, name), kind="action") == [], name


def test_a_fault_action_that_keeps_the_rules_passes(scratch: str) -> None:
    assert _table_problems(tables.add_table, tables.drop_tables, scratch) == []


@pytest.mark.parametrize(
    ("action", "rollback", "expected"),
    [
        pytest.param(
            tables.touch_then_record, tables.drop_tables, [b.BEFORE], id="touches-then-records"
        ),
        pytest.param(
            tables.never_record,
            tables.drop_tables,
            [b.NO_ENTRY, b.WRONG_ID, b.NOT_RESTORED],
            id="never-records-returns-none",
        ),
        pytest.param(
            tables.made_up_id, tables.drop_tables, [b.WRONG_ID], id="returns-a-made-up-id"
        ),
        pytest.param(
            tables.add_table,
            tables.drop_nothing,
            [b.NOT_UNDONE, b.NOT_RESTORED],
            id="rollback-undoes-nothing",
        ),
    ],
)
def test_a_fault_action_that_breaks_one_rule_fails(
    action: Callable[..., Any], rollback: Callable[..., Any], expected: list[str], scratch: str
) -> None:
    problems = _table_problems(action, rollback, scratch)
    assert [p for p in problems if not p.startswith(tuple(expected))] == [], problems
    for rule in expected:
        assert any(p.startswith(rule) for p in problems), (rule, problems)


def test_a_state_reader_blind_to_the_fault_fails(scratch: str) -> None:
    """A reader that cannot see the fault would pass the ordering rule: it fails instead."""
    problems = fault_problems(
        act=lambda: tables.add_table(netns=scratch),
        rollback=tables.drop_tables,
        state=lambda: "always the same",
        ledger=Path(default_ledger().path),
    )
    assert [p.split(":")[0] for p in problems] == [b.NOT_LIVE]


def test_the_walk_fails_on_a_broken_real_action(
    resolvers: ResolverPair,  # noqa: F811 - the imported fixture
    ledger_path: Path,
) -> None:
    """Break a real action as issue 28 describes (it returns {ledger_id: None}): its cell fails."""
    cell = CELLS["dns-rate-limit"]
    real = _function(cell.fault)

    def broken(**arguments: Any) -> dict[str, Any]:
        return {**real(**arguments), LEDGER_ID: None}

    problems = _cell_problems(cell, resolvers, ledger_path, action=broken)
    assert len(problems) == 1 and problems[0].startswith(b.WRONG_ID), problems
